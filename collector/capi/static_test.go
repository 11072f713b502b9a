package capi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestObjectsAssembleAsTheReader: the testdata clusters read from their YAML
// (as a CI artifact tree's resource dumps hold them) give the models the
// reader gives from the API server (TestAgainstAPIServer), problems
// included. not-served is left out: a dump has no notion of a kind the
// server does not serve.
func TestObjectsAssembleAsTheReader(t *testing.T) {
	for _, sc := range scenarios {
		if sc.file == "not-served" {
			continue
		}
		t.Run(sc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", sc.file+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			objs, err := DecodeObjects(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewObjects(objs).Cluster(context.Background(), sc.ns, sc.name)
			if err != nil {
				t.Fatal(err)
			}
			withoutErr(t, got)
			if diff := cmp.Diff(sc.want(), got, cmpModel...); diff != "" {
				t.Errorf("Cluster %s/%s from objects (-reader +objects):\n%s", sc.ns, sc.name, diff)
			}
		})
	}
	_, err := NewObjects(nil).Cluster(context.Background(), "a", "b")
	if !errors.Is(err, ErrClusterNotFound) {
		t.Errorf("no cluster: %v", err)
	}
}

func TestDecodeObjects(t *testing.T) {
	in := "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: cluster.x-k8s.io/v1beta2, kind: Machine, metadata: {name: a}}\n---\n\n---\n" +
		"{\"apiVersion\": \"cluster.x-k8s.io/v1beta2\", \"kind\": \"Cluster\", \"metadata\": {\"name\": \"c\"}}\n---\nkey: [unclosed\n"
	objs, err := DecodeObjects(strings.NewReader(in))
	if err == nil || !strings.Contains(err.Error(), "document") {
		t.Errorf("err %v, want one naming the bad document", err)
	}
	var names []string
	for _, u := range objs {
		names = append(names, u.GetKind()+"/"+u.GetName())
	}
	if diff := cmp.Diff([]string{"Machine/a", "Cluster/c"}, names); diff != "" {
		t.Errorf("objects before the bad document (-want +got):\n%s", diff)
	}
	if _, err := DecodeObjects(strings.NewReader("just: a map\n")); err == nil {
		t.Error("a document without kind was accepted")
	}
}
