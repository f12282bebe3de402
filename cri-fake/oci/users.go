package oci

import (
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// rootUser is a user of a program root's /etc/passwd.
type rootUser struct {
	name     string
	uid, gid uint32
	home     string
}

// rootUsers are the users every program root lists: root, nobody, and the distroless images'
// nonroot (65532), which CoreDNS's and metrics-server's images run as.
var rootUsers = []rootUser{
	{"root", 0, 0, "/root"},
	{"nobody", 65534, 65534, "/nonexistent"},
	{"nonroot", 65532, 65532, "/home/nonroot"},
}

// rootGroups are the root's /etc/group: each user's own group, with no other members.
var rootGroups = []struct {
	name string
	gid  uint32
}{{"root", 0}, {"nogroup", 65534}, {"nonroot", 65532}}

func passwdFile() string {
	var b strings.Builder
	for _, u := range rootUsers {
		fmt.Fprintf(&b, "%s:x:%d:%d:%s:%s:/sbin/nologin\n", u.name, u.uid, u.gid, u.name, u.home)
	}
	return b.String()
}

func groupFile() string {
	var b strings.Builder
	for _, g := range rootGroups {
		fmt.Fprintf(&b, "%s:x:%d:\n", g.name, g.gid)
	}
	return b.String()
}

func lookupName(name string) (rootUser, bool) {
	for _, u := range rootUsers {
		if u.name == name {
			return u, true
		}
	}
	return rootUser{}, false
}

func lookupUID(uid uint32) (rootUser, bool) {
	for _, u := range rootUsers {
		if u.uid == uid {
			return u, true
		}
	}
	return rootUser{}, false
}

func lookupGroup(name string) (uint32, bool) {
	for _, g := range rootGroups {
		if g.name == name {
			return g.gid, true
		}
	}
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), true
	}
	return 0, false
}

// resolveUser is containerd's user resolution (internal/cri/server container_create_linux.go,
// pkg/oci WithUser/WithUserID/WithAdditionalGIDs) against the root's files: a user named but
// not listed is an error; a uid not listed gets gid 0; the supplemental groups come after the
// groups the root lists the user in (none, here: every group has only its own user).
func resolveUser(sc *runtimeapi.LinuxContainerSecurityContext, imageUser string) (specs.User, error) {
	var u specs.User
	switch {
	case sc.GetRunAsUser() != nil:
		u.UID = uint32(sc.GetRunAsUser().GetValue())
		if ru, ok := lookupUID(u.UID); ok {
			u.GID = ru.gid
		}
	case sc.GetRunAsUsername() != "":
		ru, ok := lookupName(sc.GetRunAsUsername())
		if !ok {
			return u, fmt.Errorf("no users found for %q in /etc/passwd", sc.GetRunAsUsername())
		}
		u.UID, u.GID = ru.uid, ru.gid
	case imageUser != "":
		name, group, hasGroup := strings.Cut(imageUser, ":")
		if n, err := strconv.ParseUint(name, 10, 32); err == nil {
			u.UID = uint32(n)
			if ru, ok := lookupUID(u.UID); ok {
				u.GID = ru.gid
			}
		} else if ru, ok := lookupName(name); ok {
			u.UID, u.GID = ru.uid, ru.gid
		} else {
			return u, fmt.Errorf("no users found for image user %q in /etc/passwd", name)
		}
		if hasGroup {
			gid, ok := lookupGroup(group)
			if !ok {
				return u, fmt.Errorf("no groups found for image group %q in /etc/group", group)
			}
			u.GID = gid
		}
	}
	if sc.GetRunAsGroup() != nil {
		u.GID = uint32(sc.GetRunAsGroup().GetValue())
	}
	for _, g := range sc.GetSupplementalGroups() {
		u.AdditionalGids = append(u.AdditionalGids, uint32(g))
	}
	return u, nil
}
