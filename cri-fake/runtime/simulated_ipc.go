package runtime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/process"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// ipcNamespace returns the System V IPC namespace a container joins, as the sandbox's
// NamespaceOption.ipc says (the kubelet sets it for the pod; containerd puts every container
// in the sandbox's): the node's for NODE (hostIPC), which also lists the node's real objects
// from /proc/sysvipc; otherwise the pod's, shared by its containers. A sandbox without namespace
// options (not a kubelet: it always sends them) gives each container its own, as pidNamespace
// does, so such pods cost nothing here.
func (l *Simulated) ipcNamespace(ts task.Spec) *process.IPCNamespace {
	opts := ts.SandboxConfig.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if opts == nil {
		return nil
	}
	if opts.GetIpc() == runtimeapi.NamespaceMode_NODE {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.nodeIPC == nil {
			l.nodeIPC = process.NewNodeIPCNamespace("/proc/sysvipc")
		}
		return l.nodeIPC
	}
	return &l.pod(ts.SandboxID).ipcns // the zero IPCNamespace is an empty one
}
