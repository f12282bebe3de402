package ui

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/cluster"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/wiring"
)

// ForNode is the view of a node `harness up` keeps (its harness.json): cri-fake's and csi-fake's
// admin sockets (trace and fault rules) and cni-fake's log file and faults file.
func ForNode(st wiring.State) (Options, error) {
	o := Options{From: "the node in " + st.Dir}
	for _, a := range []struct{ name, ep string }{{"cri-fake", st.CRIAdmin}, {"csi-fake", st.CSIAdmin}} {
		if a.ep == "" {
			continue
		}
		o.Feeds = append(o.Feeds, &AdminFeed{FeedName: a.name, Endpoint: a.ep})
		c, err := admin.NewClient(a.ep)
		if err != nil {
			return o, err
		}
		o.Faults = append(o.Faults, FaultTarget{Name: a.name, Rules: c})
	}
	if st.CNILog != "" {
		o.Feeds = append(o.Feeds, &FileFeed{FeedName: "cni-fake", Path: st.CNILog})
	}
	if st.CNIConfDir != "" {
		n := &wiring.Node{Dir: st.Dir, CNIFaultsFile: filepath.Join(st.Dir, "etc/cni/faults.json")}
		o.Faults = append(o.Faults, FaultTarget{Name: "cni-fake", Rules: wiring.CNIFaultFile{FaultFile: n.CNIFaults()}})
	}
	return o, nil
}

// ForCluster is the view of a cluster `harness cluster up --dir DIR` started: every fake's trace
// file, each node's participants named after it (as harness trace --cluster names them), and the
// fault rules of the fakes that serve an admin socket (cluster.FaultEndpoints).
func ForCluster(dir string) (Options, error) {
	o := Options{From: "the cluster in " + dir}
	// The files it follows and the faults files it writes must be root's (issue 24).
	if err := cluster.CheckDir(dir); err != nil {
		return o, err
	}
	files, err := collect.ClusterTraceFiles(dir)
	if err != nil {
		return o, err
	}
	o.Feeds = clusterFeeds(files)
	sort.Slice(o.Feeds, func(i, j int) bool { return o.Feeds[i].Name() < o.Feeds[j].Name() })
	for _, e := range cluster.FaultEndpoints(dir) {
		switch {
		case e.AdminSocket != "":
			c, err := admin.NewClient("unix://" + e.AdminSocket)
			if err != nil {
				return o, err
			}
			o.Faults = append(o.Faults, FaultTarget{Name: e.Name, Rules: c})
		case e.CNIFaults.Path != "":
			if _, err := os.Stat(e.CNIFaults.Path); err == nil {
				o.Faults = append(o.Faults, FaultTarget{Name: e.Name, Rules: wiring.CNIFaultFile{FaultFile: e.CNIFaults}})
			}
		}
	}
	return o, nil
}
