// Package kubernetes holds the manifests of the shardfs CSI node plugin;
// its test decodes each one strictly into the Kubernetes API types, so a
// misspelt or misplaced field fails.
package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	"github.com/shardfs/shardfs/csi"
)

// decoded is every object of every manifest, by kind.
type decoded struct {
	drivers    []storagev1.CSIDriver
	daemonSets []appsv1.DaemonSet
	pvs        []corev1.PersistentVolume
	pvcs       []corev1.PersistentVolumeClaim
	pods       []corev1.Pod
	secrets    []corev1.Secret
}

func decodeAll(t *testing.T) decoded {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found (%v)", err)
	}
	var d decoded
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			var obj any
			switch meta.Kind {
			case "CSIDriver":
				d.drivers = append(d.drivers, storagev1.CSIDriver{})
				obj = &d.drivers[len(d.drivers)-1]
			case "DaemonSet":
				d.daemonSets = append(d.daemonSets, appsv1.DaemonSet{})
				obj = &d.daemonSets[len(d.daemonSets)-1]
			case "PersistentVolume":
				d.pvs = append(d.pvs, corev1.PersistentVolume{})
				obj = &d.pvs[len(d.pvs)-1]
			case "PersistentVolumeClaim":
				d.pvcs = append(d.pvcs, corev1.PersistentVolumeClaim{})
				obj = &d.pvcs[len(d.pvcs)-1]
			case "Pod":
				d.pods = append(d.pods, corev1.Pod{})
				obj = &d.pods[len(d.pods)-1]
			case "Secret":
				d.secrets = append(d.secrets, corev1.Secret{})
				obj = &d.secrets[len(d.secrets)-1]
			default:
				t.Fatalf("%s, document %d: kind %q has no decoder here", f, i+1, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s, document %d (%s): %v", f, i+1, meta.Kind, err)
			}
		}
	}
	return d
}

func TestManifestsDecodeStrictly(t *testing.T) {
	t.Parallel()
	d := decodeAll(t)
	if len(d.drivers) != 1 || len(d.daemonSets) != 1 || len(d.pvs) != 1 || len(d.pvcs) != 1 || len(d.pods) != 2 {
		t.Fatalf("want 1 CSIDriver, 1 DaemonSet, 1 PV, 1 PVC and 2 pods; got %d, %d, %d, %d, %d",
			len(d.drivers), len(d.daemonSets), len(d.pvs), len(d.pvcs), len(d.pods))
	}
}

func TestCSIDriverManifest(t *testing.T) {
	t.Parallel()
	drv := decodeAll(t).drivers[0]
	if drv.Name != csi.DriverName {
		t.Errorf("CSIDriver %q, the plugin registers %q", drv.Name, csi.DriverName)
	}
	if drv.Spec.AttachRequired == nil || *drv.Spec.AttachRequired {
		t.Errorf("attachRequired must be false: there is no Controller service to attach")
	}
	if drv.Spec.PodInfoOnMount == nil || !*drv.Spec.PodInfoOnMount {
		t.Errorf("podInfoOnMount must be true")
	}
	for _, mode := range []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral} {
		if !slices.Contains(drv.Spec.VolumeLifecycleModes, mode) {
			t.Errorf("volumeLifecycleModes lacks %s", mode)
		}
	}
}

func TestNodeDaemonSetManifest(t *testing.T) {
	t.Parallel()
	ds := decodeAll(t).daemonSets[0]
	spec := ds.Spec.Template.Spec
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	var plugin, registrar *corev1.Container
	for i := range spec.Containers {
		switch spec.Containers[i].Name {
		case "shardfs-csi":
			plugin = &spec.Containers[i]
		case "node-driver-registrar":
			registrar = &spec.Containers[i]
		}
	}
	if plugin == nil || registrar == nil {
		t.Fatal("the DaemonSet needs the shardfs-csi and node-driver-registrar containers")
	}
	if plugin.SecurityContext == nil || plugin.SecurityContext.Privileged == nil || !*plugin.SecurityContext.Privileged {
		t.Errorf("the plugin must be privileged to mount")
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range plugin.VolumeMounts {
		mounts[hostPaths[m.Name]] = m
	}
	pods, ok := mounts["/var/lib/kubelet/pods"]
	switch {
	case !ok:
		t.Errorf("the plugin does not mount kubelet's pods dir")
	case pods.MountPath != "/var/lib/kubelet/pods":
		t.Errorf("kubelet's pods dir is at %s in the plugin; targets name the host path", pods.MountPath)
	case pods.MountPropagation == nil || *pods.MountPropagation != corev1.MountPropagationBidirectional:
		t.Errorf("kubelet's pods dir needs Bidirectional propagation, or pods never see the mounts")
	}
	if _, ok := mounts["/dev/fuse"]; !ok {
		t.Errorf("the plugin does not get /dev/fuse")
	}
	cache, ok := mounts["/var/lib/shardfs-csi"]
	if !ok || !slices.Contains(plugin.Args, "--cache-root="+cache.MountPath) {
		t.Errorf("--cache-root must be the cache hostPath's mount (args %q)", plugin.Args)
	}
	if !slices.Contains(registrar.Args, "--kubelet-registration-path="+hostPaths["plugin-dir"]+"/csi.sock") {
		t.Errorf("the registrar's registration path is not the plugin socket's host path (args %q)", registrar.Args)
	}
}

func TestExampleVolumesManifests(t *testing.T) {
	t.Parallel()
	d := decodeAll(t)
	pv := d.pvs[0]
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != csi.DriverName || pv.Spec.CSI.VolumeAttributes["source"] == "" || pv.Spec.CSI.NodePublishSecretRef == nil {
		t.Errorf("the example PV must name %s, a source and a nodePublishSecretRef", csi.DriverName)
	}
	if d.pvcs[0].Spec.VolumeName != pv.Name {
		t.Errorf("the example PVC does not bind the example PV")
	}
	inline := 0
	for _, p := range d.pods {
		for _, v := range p.Spec.Volumes {
			if v.CSI != nil && v.CSI.Driver == csi.DriverName && v.CSI.VolumeAttributes["source"] != "" {
				inline++
			}
		}
	}
	if inline != 1 {
		t.Errorf("want one example pod with an inline shardfs volume, found %d", inline)
	}
}
