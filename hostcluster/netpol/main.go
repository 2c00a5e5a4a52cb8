// netpol-check: NetworkPolicy verdicts from an upstream engine, for the
// console's tests. It reads {"policies": [NetworkPolicy JSON…], "cases":
// [{name, source, destination, port, portName, protocol}…]} on stdin and
// prints one verdict per case, from github.com/mattfenwick/cyclonus's
// pkg/matcher (the engine of the cyclonus NetworkPolicy conformance tool):
// BuildNetworkPolicies, then IsTrafficAllowed. A peer with "external": true
// is an address outside the cluster's pods (a node, the proxy, a machine).
// No policy logic of ours: the tests state what must be allowed or denied.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

type peer struct {
	IP              string            `json:"ip"`
	External        bool              `json:"external"`
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	PodLabels       map[string]string `json:"podLabels"`
}

type trafficCase struct {
	Name        string `json:"name"`
	Source      peer   `json:"source"`
	Destination peer   `json:"destination"`
	Port        int    `json:"port"`
	PortName    string `json:"portName"`
	Protocol    string `json:"protocol"`
}

type input struct {
	Policies []networkingv1.NetworkPolicy `json:"policies"`
	Cases    []trafficCase               `json:"cases"`
}

type verdict struct {
	Name    string `json:"name"`
	Allowed bool   `json:"allowed"`
	Ingress bool   `json:"ingress"`
	Egress  bool   `json:"egress"`
}

func trafficPeer(p peer) *matcher.TrafficPeer {
	if p.External {
		return &matcher.TrafficPeer{IP: p.IP}
	}
	return &matcher.TrafficPeer{IP: p.IP, Internal: &matcher.InternalPeer{
		Namespace: p.Namespace, NamespaceLabels: p.NamespaceLabels, PodLabels: p.PodLabels,
	}}
}

func main() {
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "netpol-check: reading the input: %v\n", err)
		os.Exit(2)
	}
	netpols := make([]*networkingv1.NetworkPolicy, len(in.Policies))
	for i := range in.Policies {
		netpols[i] = &in.Policies[i]
	}
	policy := matcher.BuildNetworkPolicies(true, netpols)
	out := make([]verdict, 0, len(in.Cases))
	for _, c := range in.Cases {
		protocol := c.Protocol
		if protocol == "" {
			protocol = "TCP"
		}
		r := policy.IsTrafficAllowed(&matcher.Traffic{
			Source:           trafficPeer(c.Source),
			Destination:      trafficPeer(c.Destination),
			ResolvedPort:     c.Port,
			ResolvedPortName: c.PortName,
			Protocol:         corev1.Protocol(protocol),
		})
		out = append(out, verdict{Name: c.Name, Allowed: r.IsAllowed(), Ingress: r.Ingress.IsAllowed(), Egress: r.Egress.IsAllowed()})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
