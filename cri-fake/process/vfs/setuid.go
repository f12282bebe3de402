package vfs

import "io/fs"

// SetUID gives the image file p the set-user-ID bit (chmod u+s, as an image's
// Dockerfile does with `RUN chmod +s`), keeping its owner (root for image
// files); execve(2) then runs it as that owner unless no_new_privs is set
// (kernel execIdentity). It reports whether p is a regular file of the layer.
func (l *Layer) SetUID(p string) bool {
	n, ok := l.entries[cleanAbs(p)]
	if !ok || !n.mode.IsRegular() {
		return false
	}
	n.mode |= fs.ModeSetuid
	return true
}
