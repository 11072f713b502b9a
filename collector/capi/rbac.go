package capi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ErrClusterNotFound: the Cluster asked for does not exist (the API server
// said 404 for it). A Forbidden is never this error.
var ErrClusterNotFound = errors.New("cluster not found")

// ErrCAPINotServed: the API server does not serve cluster.x-k8s.io
// Clusters (Cluster API is not installed, or this is not a management
// cluster).
var ErrCAPINotServed = errors.New("the API server does not serve Cluster API Clusters (cluster.x-k8s.io)")

// Verbs is what the collector needs on each kind it reads: the reader gets
// and lists, the cache lists and watches. The least role is one rule with
// these verbs per resource; the reader never writes.
const Verbs = "get, list, watch"

// RoleFor is the least RBAC rule that lets the collector read resource (a
// "plural.group" name) in namespace ("" = all namespaces).
func RoleFor(resource, namespace string) string {
	if namespace == "" {
		return fmt.Sprintf("%s on %s in all namespaces (ClusterRole + ClusterRoleBinding)", Verbs, resource)
	}
	return fmt.Sprintf("%s on %s in namespace %s", Verbs, resource, namespace)
}

// resourceName is "plural.group" (or the plural for the core group), as
// kubectl and RBAC name a resource.
func resourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

// ForbiddenError is the API server's 403 on something the reader cannot do
// without: the Cluster itself. It names who asked and the role needed; it
// unwraps to the API server's error (apierrors.IsForbidden holds).
type ForbiddenError struct {
	Problem ReadProblem
	Err     error
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("%s: %s", e.Problem.String(), e.Err)
}

func (e *ForbiddenError) Unwrap() error { return e.Err }

// String is the problem as a sentence.
func (p ReadProblem) String() string {
	what := p.Resource
	if p.Name != "" {
		what += " " + p.Name
	}
	switch {
	case p.Forbidden:
		return fmt.Sprintf("forbidden: %s may not %s %s; it needs a role granting %s", p.Identity, p.Verb, what, p.Role)
	case p.NotServed:
		return fmt.Sprintf("the API server does not serve %s (its CRD is not installed)", p.Resource)
	case p.NotFound:
		return fmt.Sprintf("%s not found", what)
	}
	return fmt.Sprintf("%s %s: %s", p.Verb, what, p.Err)
}

// identity finds out who the client is, once, with a SelfSubjectReview
// (authentication.k8s.io/v1, allowed to every authenticated user by the
// default RBAC role system:basic-user). A review is a create that the
// server does not store; it is the only non-read request the reader makes,
// and only after a Forbidden. When it is refused or unsupported the
// identity is "unknown".
type identity struct {
	dyn  dynamic.Interface
	once sync.Once
	name string
}

var selfSubjectReviews = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

func (id *identity) get(ctx context.Context) string {
	id.once.Do(func() {
		id.name = "unknown"
		review := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "authentication.k8s.io/v1",
			"kind":       "SelfSubjectReview",
		}}
		out, err := id.dyn.Resource(selfSubjectReviews).Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return
		}
		user := nestedString(out.Object, "status", "userInfo", "username")
		if user == "" {
			return
		}
		var groups []string
		for _, g := range nestedSlice(out.Object, "status", "userInfo", "groups") {
			if s, ok := g.(string); ok {
				groups = append(groups, s)
			}
		}
		id.name = fmt.Sprintf("user %q", user)
		if len(groups) > 0 {
			id.name += " (groups " + strings.Join(groups, ", ") + ")"
		}
	})
	return id.name
}

// problem turns a failed read into a ReadProblem: a 403 becomes Forbidden
// with the identity and the least role, a kind the RESTMapper does not know
// (or a 404 on a list) NotServed, a 404 on a get NotFound; anything else
// keeps its message.
func problem(ctx context.Context, id *identity, gvr schema.GroupVersionResource, gk schema.GroupKind, verb, namespace, name string, err error) ReadProblem {
	p := ReadProblem{Verb: verb, Resource: resourceName(gvr), Err: err.Error()}
	if gvr.Resource == "" {
		// Not mapped: name the kind, lower-case plural unknown.
		p.Resource = strings.ToLower(gk.Kind) + "." + gk.Group
		if gk.Group == "" {
			p.Resource = strings.ToLower(gk.Kind)
		}
	}
	if name != "" {
		p.Name = namespace + "/" + name
	}
	switch {
	case meta.IsNoMatchError(err):
		p.NotServed = true
	case apierrors.IsForbidden(err):
		p.Forbidden = true
		p.Identity = id.get(ctx)
		p.Role = RoleFor(p.Resource, namespace)
	case apierrors.IsNotFound(err) && name == "":
		// A list answered 404: the resource went away (CRD deleted
		// after discovery).
		p.NotServed = true
	case apierrors.IsNotFound(err):
		p.NotFound = true
	}
	return p
}
