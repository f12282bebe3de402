package cluster

// rbacManifest is what `up` applies once the API server is ready.
//
// The API server's kubelet client (--kubelet-client-certificate, user kube-apiserver-kubelet-client) gets
// system:kubelet-api-admin, as hack/local-up-cluster.sh binds it: without it the kubelets' webhook
// authorisation refuses the API server's proxy calls, and kubectl logs, exec and port-forward fail.
//
// Each CSI sidecar runs out of cluster with a client certificate of its own (user plugsim:<sidecar>), bound
// to a ClusterRole with the rules of the sidecar's deploy/kubernetes/rbac.yaml (external-provisioner v6,
// external-attacher v4, external-resizer v2, external-snapshotter v8's csi-snapshotter); their namespaced
// leader-election Roles are left out, as leader election is off by default.
const rbacManifest = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "plugsim:kube-apiserver-kubelet-api-admin"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "plugsim:csi-provisioner"}
rules:
- {apiGroups: [""], resources: [persistentvolumes], verbs: [get, list, watch, create, patch, delete]}
- {apiGroups: [""], resources: [persistentvolumeclaims], verbs: [get, list, watch, update]}
- {apiGroups: [storage.k8s.io], resources: [storageclasses], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [events], verbs: [list, watch, create, update, patch]}
- {apiGroups: [snapshot.storage.k8s.io], resources: [volumesnapshots], verbs: [get, list]}
- {apiGroups: [snapshot.storage.k8s.io], resources: [volumesnapshotcontents], verbs: [get, list]}
- {apiGroups: [storage.k8s.io], resources: [csinodes], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [volumeattachments], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [volumeattributesclasses], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [csistoragecapacities], verbs: [get, list, watch, create, update, patch, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "plugsim:csi-attacher"}
rules:
- {apiGroups: [""], resources: [persistentvolumes], verbs: [get, list, watch, patch]}
- {apiGroups: [storage.k8s.io], resources: [csinodes], verbs: [get, list, watch]}
- {apiGroups: [storage.k8s.io], resources: [volumeattachments], verbs: [get, list, watch, patch]}
- {apiGroups: [storage.k8s.io], resources: [volumeattachments/status], verbs: [patch]}
- {apiGroups: [""], resources: [events], verbs: [list, watch, create, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "plugsim:csi-resizer"}
rules:
- {apiGroups: [""], resources: [persistentvolumes], verbs: [get, list, watch, patch]}
- {apiGroups: [""], resources: [persistentvolumeclaims], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [persistentvolumeclaims/status], verbs: [patch]}
- {apiGroups: [""], resources: [events], verbs: [list, watch, create, update, patch]}
- {apiGroups: [storage.k8s.io], resources: [volumeattributesclasses], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "plugsim:csi-snapshotter"}
rules:
- {apiGroups: [""], resources: [events], verbs: [list, watch, create, update, patch]}
- {apiGroups: [snapshot.storage.k8s.io], resources: [volumesnapshotclasses], verbs: [get, list, watch]}
- {apiGroups: [snapshot.storage.k8s.io], resources: [volumesnapshotcontents], verbs: [get, list, watch, update, patch]}
- {apiGroups: [snapshot.storage.k8s.io], resources: [volumesnapshotcontents/status], verbs: [update, patch]}
- {apiGroups: [groupsnapshot.storage.k8s.io], resources: [volumegroupsnapshotclasses], verbs: [get, list, watch]}
- {apiGroups: [groupsnapshot.storage.k8s.io], resources: [volumegroupsnapshotcontents], verbs: [get, list, watch, update, patch]}
- {apiGroups: [groupsnapshot.storage.k8s.io], resources: [volumegroupsnapshotcontents/status], verbs: [update, patch]}
` + sidecarBindings

const sidecarBindings = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "plugsim:csi-provisioner"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "plugsim:csi-provisioner"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "plugsim:csi-provisioner"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "plugsim:csi-attacher"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "plugsim:csi-attacher"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "plugsim:csi-attacher"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "plugsim:csi-resizer"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "plugsim:csi-resizer"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "plugsim:csi-resizer"}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "plugsim:csi-snapshotter"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "plugsim:csi-snapshotter"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "plugsim:csi-snapshotter"}]
`
