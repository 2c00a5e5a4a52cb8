# The two commands of the README. Everything else is in scripts/.
.PHONY: run test bench bench-scale lint fmt test-host

run: ## Build and run the console on http://127.0.0.1:3000 (embedded SQLite in ./data)
	bash scripts/run.sh

test: ## Every test: unit, storage (SQLite + PostgreSQL), HTTP, browser (Playwright), host cluster
	bash scripts/test.sh

bench: ## Figures: bundle size, memory, the list page against a static file, cold start, reconciler, sign-in starts
	bash scripts/bench.sh

bench-scale: ## Figures at scale: observer reads (10,000 clusters), RSS per cluster, 1,000 live pages, Ready latency, 1,000-cluster move (not in make test)
	bash scripts/bench-scale.sh

lint: ## Formatting, clippy (console and hostsim) and shellcheck (scripts); part of `make test`
	bash scripts/install-tools.sh --test && bash scripts/lint.sh

fmt: ## Format the code as `make lint` checks it: leptosfmt (view! macros), then rustfmt (the console and hostsim)
	bash scripts/install-tools.sh --test && bash -c 'source scripts/lib.sh && leptosfmt src >/dev/null && cargo fmt && cargo fmt --manifest-path hostsim/Cargo.toml'

test-host: ## Only the host cluster tests: real etcd + kube-apiserver + kube-controller-manager, hostsim
	bash scripts/hostsim-test.sh
