// Package nodens makes and takes away what a node of `harness cluster` runs in besides its network
// namespace: its cgroup in every hierarchy of the machine, with the cgroups of its programs below it
// (cgroups.go); its cgroup namespace, rooted at that cgroup; and its mount namespace, where the node's
// /var/lib/kubelet is its own directory and the cgroup hierarchies show the node's cgroup as their root
// (mountns.go). A node's kubelet, cri-fake (and the runc under it) and csi-fakes are started in them
// (InCgroup, then nsenter), and `harness cluster down` clears them (ClearMountNS, Cgroups).
package nodens
