package heartbeat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
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

// NewClient is a client of the API server's leases. Its calls are bounded
// by timeout besides their context; 0 leaves them to the context.
func NewClient(cfg *rest.Config, userAgent string, timeout time.Duration) (coordinationclient.LeasesGetter, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	cfg.Timeout = timeout
	c, err := coordinationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client of %s: %w", cfg.Host, err)
	}
	return c, nil
}
