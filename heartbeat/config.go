package heartbeat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoAPIServer: neither a kubeconfig nor a pod's service account says
// where the API server is.
var ErrNoAPIServer = errors.New("no Kubernetes API server: not in a pod (KUBERNETES_SERVICE_HOST is unset) and no kubeconfig " +
	"(--kubeconfig, KUBECONFIG or ~/.kube/config)")

// RESTConfig finds the API server as controller-runtime does, which is
// how etcd-backup-restore finds it: the kubeconfig file given, else
// $KUBECONFIG, else the pod's service account, else ~/.kube/config.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	if kubeconfig != "" {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("the pod's service account: %w", err)
	}
	home, herr := os.UserHomeDir()
	if herr != nil {
		return nil, ErrNoAPIServer
	}
	path := filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
	if _, serr := os.Stat(path); serr != nil {
		return nil, ErrNoAPIServer
	}
	return RESTConfig(path)
}
