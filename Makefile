# The two commands of the README. Everything else is in scripts/.
.PHONY: run test bench

run: ## Build and run the console on http://127.0.0.1:3000 (embedded SQLite in ./data)
	bash scripts/run.sh

test: ## Every test: unit, storage (SQLite + PostgreSQL), HTTP, browser (Playwright), host cluster
	bash scripts/test.sh

bench: ## Bundle size and server memory figures
	bash scripts/bench.sh
