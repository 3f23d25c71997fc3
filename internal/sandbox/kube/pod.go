package kube

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proctorhq/proctor/internal/relayproto"
	"github.com/proctorhq/proctor/internal/sandbox"
)

// Pod is the pod that runs spec from image (a reference the cluster pulls) with gpus GPUs.
func (p *Provider) Pod(spec sandbox.Spec, image string, gpus int) *corev1.Pod {
	network := "none"
	if spec.Network {
		network = "egress"
	}
	// Two tries, or two sandboxes of one id, never share a pod name.
	sandboxLabel := labelValue(spec.ID) + "-" + strconv.FormatUint(rand.Uint64()%(36*36*36*36*36), 36)
	res := corev1.ResourceList{}
	if spec.Resources.CPU > 0 {
		res[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(spec.Resources.CPU*1000), resource.DecimalSI)
	}
	if spec.Resources.MemoryMB > 0 {
		res[corev1.ResourceMemory] = *resource.NewQuantity(int64(spec.Resources.MemoryMB)<<20, resource.BinarySI)
	}
	selector := maps.Clone(p.o.NodeSelector)
	var tolerations []corev1.Toleration
	if gpus > 0 {
		res[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		if selector == nil {
			selector = map[string]string{}
		}
		maps.Copy(selector, p.o.GPUNodeSelector)
		tolerations = append(tolerations, corev1.Toleration{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	no := false
	var hostUsers *bool // the cluster's default: the node's users
	if p.o.UserNamespaces {
		hostUsers = &no
	}
	grace := int64(p.grace.Round(time.Second) / time.Second)
	var pullSecrets []corev1.LocalObjectReference
	for _, name := range p.o.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: name})
	}
	command := spec.Command
	if spec.Listen != nil {
		command = relayCommand(spec, false)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "sb-" + sandboxLabel, Namespace: p.o.Namespace,
			Labels: map[string]string{LabelManagedBy: "proctor", LabelOwner: p.owner, LabelSandbox: sandboxLabel, LabelNetwork: network},
			// The full id, which a label value may not hold.
			Annotations: map[string]string{"proctor.dev/sandbox-id": spec.ID},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  selector,
			Tolerations:                   tolerations,
			ImagePullSecrets:              pullSecrets,
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			HostUsers:                     hostUsers,
			Containers: []corev1.Container{{
				Name: ContainerName, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: command[:1], Args: command[1:], Env: containerEnv(spec), WorkingDir: cmp.Or(spec.Dir, sandbox.WorkDirInImage),
				Stdin: true, StdinOnce: true,
				Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
				SecurityContext: lockedDown(spec.WritableRoot),
				VolumeMounts:    volumeMounts(),
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				// Mounted by no container of the pod's own: an image's files for a sandbox within
				// it (Spec.Mounts), which the environment cannot touch (see within.go).
				{Name: agentVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// containerEnv is a container's environment for spec: HOME the work dir, then spec's.
func containerEnv(spec sandbox.Spec) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: "HOME", Value: sandbox.WorkDirInImage}}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if k != "HOME" {
			env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
		}
	}
	return env
}

// lockedDown is every sandbox container's security context: no privileges, a read-only root
// (unless writableRoot: the container's own layer, gone with it; see sandbox.Spec.WritableRoot).
func lockedDown(writableRoot bool) *corev1.SecurityContext {
	no, readOnly := false, !writableRoot
	return &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &readOnly,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// agentVolume is the pod's volume that an image is copied into for a sandbox within it.
const agentVolume = "agent"

// volumeMounts are a sandbox container's writable places: /tmp and the work dir in it.
func volumeMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "work", MountPath: sandbox.WorkDirInImage}}
}

// relayCommand is spec's command behind the relay: it listens on spec's port for the command and
// on relayBackPort for the worker's connections.
func relayCommand(spec sandbox.Spec, lifeline bool) []string {
	return relayproto.Command(relayInImage, lifeline, fmt.Sprintf("127.0.0.1:%d", spec.Listen.Port),
		fmt.Sprintf("%s127.0.0.1:%d", relayproto.AcceptPrefix, relayBackPort), spec.Command)
}

var notLabelChars = regexp.MustCompile(`[^a-z0-9.-]+`)

// labelValue is s as a label value that can also start a pod name: lower case, at most 50
// characters, starting and ending with an alphanumeric character.
func labelValue(s string) string {
	v := notLabelChars.ReplaceAllString(strings.ToLower(s), "-")
	if len(v) > 50 {
		v = v[:50]
	}
	return cmp.Or(strings.Trim(v, "-."), "x")
}
