// Command pause is the process of a pod sandbox on the single-node
// Kubernetes of tools/druid-e2e.sh (containerd runs one per pod): it waits
// for the signal that ends the pod. Built into the image
// registry.k8s.io/pause that containerd's CRI asks for, since this machine
// reaches no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
