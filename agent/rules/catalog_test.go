package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestCatalogIsValid(t *testing.T) {
	if err := Validate(); err != nil {
		t.Fatal(err)
	}
	if err := checkAcyclic(); err != nil {
		t.Fatal(err)
	}
}

// Every category of the contract is named by some problem, except those
// whose evidence this agent does not collect yet.
func TestEveryCategoryHasAProblem(t *testing.T) {
	pending := map[string]bool{}
	used := map[string]bool{}
	for _, p := range All() {
		used[p.Category] = true
	}
	for _, c := range Categories {
		if !used[c] && !pending[c] {
			t.Errorf("category %s has no problem in the catalog", c)
		}
		if used[c] && pending[c] {
			t.Errorf("category %s is marked pending but has problems: drop it from pending", c)
		}
	}
}

func TestExpand(t *testing.T) {
	got := expand("kubelet {version} rejects --{flag} set in {file}{missing}", Params{"version": "v1.35.0", "flag": "pod-infra-container-image", "file": "/etc/sysconfig/kubelet"})
	want := "kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet{missing}"
	if got != want {
		t.Errorf("expand = %q, want %q", got, want)
	}
}

func f(id string, quotes ...*nodediagv1.Quote) *nodediagv1.Finding {
	p, ok := Lookup(id)
	if !ok {
		panic(id)
	}
	return p.Finding(Params{}, quotes...)
}

func ids(fs []*nodediagv1.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Id)
	}
	return out
}

func TestRank(t *testing.T) {
	tests := []struct {
		name          string
		in            []string
		want          []string
		wantExplains  map[string][]string
		wantConsequen []string
	}{
		{
			name: "the cause comes before the symptoms it explains, whatever the input order",
			in:   []string{"BootstrapSentinelMissing", "CloudInitFailed", "KubeletNotHealthy", "KubeletRemovedFlag"},
			want: []string{"KubeletRemovedFlag", "KubeletNotHealthy", "CloudInitFailed", "BootstrapSentinelMissing"},
			wantExplains: map[string][]string{
				"KubeletRemovedFlag": {"BootstrapSentinelMissing", "CloudInitFailed", "KubeletNotHealthy"},
				"KubeletNotHealthy":  {"BootstrapSentinelMissing", "CloudInitFailed"},
				"CloudInitFailed":    {"BootstrapSentinelMissing"},
			},
			wantConsequen: []string{"KubeletNotHealthy", "CloudInitFailed", "BootstrapSentinelMissing"},
		},
		{
			name: "a failed binary replacement explains the skew it leaves behind",
			in:   []string{"KubeadmPreflightKubeletVersion", "KubeletNewerThanControlPlane", "VersionMismatch", "BootstrapDownloadFailed"},
			want: []string{"BootstrapDownloadFailed", "VersionMismatch", "KubeletNewerThanControlPlane", "KubeadmPreflightKubeletVersion"},
		},
		{
			name: "an unexplained symptom ranks below an unexplained cause of the same severity",
			in:   []string{"BootstrapSentinelMissing", "CNIPluginMissing"},
			want: []string{"CNIPluginMissing", "BootstrapSentinelMissing"},
		},
		{
			name: "independent root candidates come before the consequences of any of them",
			in:   []string{"BootstrapSentinelMissing", "DiskNearlyFull", "SwapEnabled"},
			want: []string{"SwapEnabled", "DiskNearlyFull", "BootstrapSentinelMissing"},
		},
		{
			name: "an info finding never demotes an error",
			in:   []string{"BootstrapInProgress", "DiskFull"},
			want: []string{"DiskFull", "BootstrapInProgress"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs []*nodediagv1.Finding
			for _, id := range tt.in {
				fs = append(fs, f(id))
			}
			rank(fs, rankOptions{})
			if diff := cmp.Diff(tt.want, ids(fs)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			for _, fd := range fs {
				if want, ok := tt.wantExplains[fd.Id]; ok {
					if diff := cmp.Diff(want, fd.Explains); diff != "" {
						t.Errorf("%s explains (-want +got):\n%s", fd.Id, diff)
					}
				}
			}
			for _, id := range tt.wantConsequen {
				for _, fd := range fs {
					if fd.Id == id && !fd.Consequence {
						t.Errorf("%s should be a consequence", id)
					}
				}
			}
			if fs[0].Consequence {
				t.Errorf("the first finding %s is marked a consequence", fs[0].Id)
			}
		})
	}
}

// A log line can lend its quote to a Go finding only when the ID was raised
// once: with two expired certificates it is not known which one it is about.
func TestMergeOnlyIntoAnUnambiguousFinding(t *testing.T) {
	q := &nodediagv1.Quote{Source: "/var/log/syslog", Line: 3, Excerpt: "x509: certificate has expired"}
	one := []*nodediagv1.Finding{f("CertificateExpired")}
	got := merge(one, []*nodediagv1.Finding{f("CertificateExpired", q)})
	if len(got) != 1 || len(got[0].Evidence) != 1 {
		t.Errorf("one Go finding: the quote should join it, got %v", got)
	}
	two := []*nodediagv1.Finding{f("CertificateExpired"), f("CertificateExpired")}
	got = merge(two, []*nodediagv1.Finding{f("CertificateExpired", q)})
	if len(got) != 3 {
		t.Errorf("two Go findings: the log finding should stay apart, got %d findings", len(got))
	}
}

// Every cluster category is some cluster problem's, and cluster problems
// use only cluster categories (Validate checks the second).
func TestEveryClusterCategoryHasAProblem(t *testing.T) {
	used := map[string]bool{}
	for _, p := range All() {
		if p.Scope == ScopeCluster {
			used[p.Category] = true
		}
	}
	for _, c := range ClusterCategories {
		if !used[c] {
			t.Errorf("cluster category %s has no problem in the catalog", c)
		}
	}
}
