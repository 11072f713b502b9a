package logline

import (
	"strings"
	"testing"
)

// Lines of a busy, healthy node: most lines the agent reads are not
// notable, and Notable runs on every one of them.
var benchLines = []string{
	`I0501 10:00:00.123456    1876 pod_workers.go:1301] "Syncing pod" pod="kube-system/kube-proxy-7x2kq" podUID="0d4c5b8e-8f4a-4f1b-9c1e-3f2a1b0c9d8e" updateType="sync"`,
	`I0501 10:00:01.000001    1876 kubelet_node_status.go:76] "Successfully registered node" node="aks-nodepool1-12345678-vmss000000"`,
	`I0501 10:00:02.000002    1876 reconciler_common.go:245] "operationExecutor.VerifyControllerAttachedVolume started for volume \"kube-api-access-abcde\" (UniqueName: \"kubernetes.io/projected/0d4c5b8e-kube-api-access-abcde\") pod \"coredns-5d78c9869d-abcde\" (UID: \"0d4c5b8e\") " pod="kube-system/coredns-5d78c9869d-abcde"`,
	`time="2024-05-01T10:00:03.123456789Z" level=info msg="PullImage \"registry.k8s.io/pause:3.10\" returns image reference \"sha256:873ed75102791e5b0b8a7fcd41606c92fcec98d56d05ead4ac5131650004c136\""`,
	`time="2024-05-01T10:00:04.000000000Z" level=info msg="StartContainer for \"4f5e6d7c8b9a\" returns successfully"`,
	`I0501 10:00:05.000005    1876 kuberuntime_manager.go:1079] "Creating PodSandbox for pod" pod="kube-system/kube-proxy-7x2kq"`,
	`E0501 10:00:06.000006    1876 pod_workers.go:1301] "Error syncing pod, skipping" err="network is not ready: container runtime network not ready" pod="kube-system/coredns-5d78c9869d-abcde"`,
	`I0501 10:00:07.000007    1876 prober.go:107] "Probe failed" probeType="Readiness" pod="kube-system/coredns-5d78c9869d-abcde" podUID="0d4c5b8e" containerName="coredns" probeResult="failure" output="HTTP probe failed with statuscode: 503"`,
}

func BenchmarkNotable(b *testing.B) {
	n := 0
	for _, l := range benchLines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, l := range benchLines {
			Notable(l)
		}
	}
}

// Every word is found wherever it sits in a line and in any case.
func TestWordsInFindsEveryWord(t *testing.T) {
	pads := []string{"", "x", "ab", "abc", "I0501 10:00:00.000000    1876 a.go:1] ", `time="2024-05-01T10:00:03Z" level=info msg="`}
	for _, list := range []struct {
		words []string
		mask  uint8
	}{{failureWords, failureWord}, {keepWords, keepWord}} {
		for _, w := range list.words {
			for _, pre := range pads {
				for _, post := range []string{"", "y", " tail of the line"} {
					for _, form := range []string{w, strings.ToUpper(w), strings.ToUpper(w[:1]) + w[1:]} {
						line := pre + form + post
						if wordsIn(line, list.mask) == 0 {
							t.Errorf("wordsIn(%q) misses %q", line, w)
						}
					}
				}
			}
		}
	}
}
