package cluster

// rbacManifest is what `up` applies once the API server is ready, before examples/csi/sidecars-rbac.yaml
// (the CSI sidecars' and snapshot-controller's ClusterRoles, bound to their pods' service accounts).
//
// The API server's kubelet client (--kubelet-client-certificate, user kube-apiserver-kubelet-client) gets
// system:kubelet-api-admin, as hack/local-up-cluster.sh binds it: without it the kubelets' webhook
// authorisation refuses the API server's proxy calls, and kubectl logs, exec and port-forward fail.
const rbacManifest = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "plugsim:kube-apiserver-kubelet-api-admin"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
`
