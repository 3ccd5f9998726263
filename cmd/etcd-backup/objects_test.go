package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/heartbeat"
)

// backupObjectsRole is what the chart grants the sidecar for
// --backup-objects (deploy/helm/etcdkit/templates/rbac.yaml).
const backupObjectsRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: etcd-backup-objects
rules:
  - apiGroups: [backup.etcdkit.io]
    resources: [etcdsnapshots]
    verbs: [get, list, create, delete]
  - apiGroups: [backup.etcdkit.io]
    resources: [etcdbackups]
    verbs: [get, list]
  - apiGroups: [backup.etcdkit.io]
    resources: [etcdsnapshots/status, etcdbackups/status]
    verbs: [patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: etcd-backup-objects
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: etcd-backup-objects
subjects:
  - kind: ServiceAccount
    name: etcd
`

// serve --backup-objects keeps the store's catalog as EtcdSnapshot
// objects and takes the fulls EtcdBackups ask for. Without the right to
// write them, and then without their CRD, it says once why and backs up
// all the same; once both are there the objects follow: one per full with
// its chain summed up and a drill's verdict, a full asked for lands and
// says where, and an object goes when retention deletes its full.
func TestBackupObjects(t *testing.T) {
	t.Parallel()
	k := startKube(t, "etcd")
	k.apply(rbacManifest, "ServiceAccount")
	kubeconfig := k.kubeconfig("etcd")
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := c.Security
	storeURL := "file://" + filepath.Join(t.TempDir(), "store")
	conn := append([]string{"--endpoints", c.Endpoints()[0]}, connFlags(sec, "")...)
	p := serveProc(t, "", conn, storeURL, "--backup-objects", "etcd-main", "--retention-policy", "limit-based", "--max-fulls", "2",
		"--gc-period", "1s", "--delta-period", "500ms", "--drill-period", "2s")
	p.env = []string{"POD_NAMESPACE=etcd", "KUBECONFIG=" + kubeconfig}
	p.start(t)
	logged := func(what, text string) {
		t.Helper()
		etcdtest.Eventually(t, what, time.Minute, func() bool { return strings.Contains(p.logs.String(), text) })
	}
	logged("the sidecar says it may not write the objects", "may not write them")
	uploading(t, p)

	k.kubectl([]byte(backupObjectsRole), "apply", "--namespace=etcd", "-f", "-")
	logged("the sidecar says the API server does not serve them", "does not serve backup.etcdkit.io/v1alpha1")
	k.kubectl(nil, "apply", "-f", filepath.Join("..", "..", "deploy", "kubernetes", "etcdsnapshot-crd.yaml"))
	k.kubectl(nil, "wait", "--for=condition=established", "--timeout=60s", "crd/etcdsnapshots.backup.etcdkit.io", "crd/etcdbackups.backup.etcdkit.io")
	logged("the sidecar writes the objects", "backup objects: written")
	if n := strings.Count(p.logs.String(), "may not write them"); n != 1 {
		t.Fatalf("the refusal was said %d times, want once", n)
	}

	snapshots := func() []heartbeat.EtcdSnapshot {
		t.Helper()
		var list struct{ Items []heartbeat.EtcdSnapshot }
		must(t, json.Unmarshal([]byte(k.kubectl(nil, "get", "etcdsnapshots", "--namespace=etcd", "-o", "json")), &list))
		return list.Items
	}
	etcdtest.Eventually(t, "an EtcdSnapshot of the first full, verified by a drill", time.Minute, func() bool {
		s := snapshots()
		return len(s) == 1 && s[0].Status.ReadyToUse && s[0].Status.Verified != nil && s[0].Status.Verified.Result == "ok"
	})
	first := snapshots()[0]
	if first.Spec.ClusterName != "etcd-main" || first.Labels[heartbeat.ClusterLabel] != "etcd-main" || first.Spec.Location != storeURL+"/"+first.Spec.Key ||
		first.Spec.ClusterID == "" || !first.Status.Latest {
		t.Fatalf("the first EtcdSnapshot: %+v", first)
	}
	rev := putKeys(t, c.Client(t), 20)
	etcdtest.Eventually(t, "the EtcdSnapshot follows the deltas", time.Minute, func() bool {
		s := snapshots()
		return len(s) == 1 && s[0].Status.LastRevision >= rev && s[0].Status.Deltas > 0
	})

	// A pin shows on the object (a delta brings the objects in step),
	// and goes with unpin.
	ok(t, nil, "pin", "--store", storeURL, first.Spec.Key, "--label", "before-upgrade")
	etcdtest.Eventually(t, "the EtcdSnapshot says it is pinned", time.Minute, func() bool {
		putKeys(t, c.Client(t), 1)
		s := snapshots()
		return len(s) == 1 && s[0].Status.Pinned && s[0].Status.Pin != nil && s[0].Status.Pin.Label == "before-upgrade"
	})
	t.Logf("kubectl get etcdsnapshots, pinned:\n%s", k.kubectl(nil, "get", "etcdsnapshots", "--namespace=etcd"))
	ok(t, nil, "unpin", "--store", storeURL, first.Spec.Key)
	etcdtest.Eventually(t, "the EtcdSnapshot says it is not pinned", time.Minute, func() bool {
		putKeys(t, c.Client(t), 1)
		s := snapshots()
		return len(s) == 1 && !s[0].Status.Pinned && s[0].Status.Pin == nil
	})

	// Two fulls asked for: with two kept, the first full goes, and its
	// object with it.
	for i := range 2 {
		name := fmt.Sprintf("now-%d", i)
		k.kubectl([]byte(fmt.Sprintf("apiVersion: backup.etcdkit.io/v1alpha1\nkind: EtcdBackup\nmetadata:\n  name: %s\nspec:\n  clusterName: etcd-main\n", name)),
			"create", "--namespace=etcd", "-f", "-")
		var b heartbeat.EtcdBackup
		etcdtest.Eventually(t, name+" succeeds", time.Minute, func() bool {
			must(t, json.Unmarshal([]byte(k.kubectl(nil, "get", "etcdbackup", name, "--namespace=etcd", "-o", "json")), &b))
			return b.Status.Phase == heartbeat.PhaseSucceeded
		})
		if b.Status.Snapshot == "" || !strings.HasPrefix(b.Status.SnapshotLocation, storeURL+"/") || b.Status.Revision < rev || b.Status.SnapshotSizeBytes == 0 ||
			b.Status.CompletionTime == nil || len(b.Status.Conditions) != 2 || b.Status.Conditions[0].Status != "True" || b.Status.Conditions[1].Status != "True" {
			t.Fatalf("%s: %+v", name, b.Status)
		}
		k.kubectl(nil, "get", "etcdsnapshot", b.Status.Snapshot, "--namespace=etcd")
	}
	etcdtest.Eventually(t, "retention's deletion reaches the objects", time.Minute, func() bool {
		s := snapshots()
		return len(s) == 2 && s[0].Name != first.Name && s[1].Name != first.Name
	})
	// A third: the full the first EtcdBackup asked for goes, and its
	// status says so.
	k.kubectl([]byte("apiVersion: backup.etcdkit.io/v1alpha1\nkind: EtcdBackup\nmetadata:\n  name: now-2\n"), "create", "--namespace=etcd", "-f", "-")
	etcdtest.Eventually(t, "now-0 says its full is gone", time.Minute, func() bool {
		var b heartbeat.EtcdBackup
		must(t, json.Unmarshal([]byte(k.kubectl(nil, "get", "etcdbackup", "now-0", "--namespace=etcd", "-o", "json")), &b))
		for _, c := range b.Status.Conditions {
			if c.Type == "Available" && c.Status == "False" && c.Reason == "DeletedByRetention" {
				return b.Status.Phase == heartbeat.PhaseSucceeded
			}
		}
		return false
	})
	t.Logf("kubectl get etcdsnapshots:\n%s", k.kubectl(nil, "get", "etcdsnapshots", "--namespace=etcd"))
	t.Logf("kubectl get etcdbackups:\n%s", k.kubectl(nil, "get", "etcdbackups", "--namespace=etcd"))
}
