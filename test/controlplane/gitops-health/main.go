// Command gitops-health tells what Argo CD and Flux conclude about Kubernetes objects, computed by
// the code those tools run rather than by our reading of it, so that docs/gitops-health.md can be
// checked against them:
//
//   - kstatus: sigs.k8s.io/cli-utils status.Compute, the rules kstatus documents;
//   - fluxKstatus: Flux's fork of kstatus behind Flux's generic status reader, which is what the
//     kustomize-controller runs for `wait: true` on a kind it has no special reader for;
//   - fluxHealthCheckExprs: fluxcd/pkg runtime/cel's StatusEvaluator behind runtime/cel's status
//     reader, which is what the kustomize-controller runs instead for a kind listed in
//     `healthCheckExprs`;
//   - argocd: a health Lua script run by gopher-lua in a state set up as Argo CD sets one up for
//     a customization from argocd-cm, its answer read back as Argo CD reads it.
//
// Input (stdin, JSON): {"argocdHealthLua": "...", "fluxHealthCheckExprs": {"apiVersion", "kind",
// "current", "failed", "inProgress"}, "objects": [...]}; the script and the expressions are
// optional. Output (stdout, JSON): {"verdicts": [...]}, one per object in order, each engine's
// answer as {"status", "message"}. Input that is not JSON, an object that is not a Kubernetes
// object, or a script or expression that does not parse exits 2 with the reason on stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	fluxstatusreaders "github.com/fluxcd/cli-utils/pkg/kstatus/polling/statusreaders"
	fluxstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type input struct {
	ArgoCDHealthLua      string                       `json:"argocdHealthLua"`
	FluxHealthCheckExprs *kustomize.CustomHealthCheck `json:"fluxHealthCheckExprs"`
	Objects              []json.RawMessage            `json:"objects"`
}

// verdict is one engine's answer about one object.
type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

type verdicts struct {
	Kstatus              verdict  `json:"kstatus"`
	FluxKstatus          verdict  `json:"fluxKstatus"`
	FluxHealthCheckExprs *verdict `json:"fluxHealthCheckExprs,omitempty"`
	ArgoCD               *verdict `json:"argocd,omitempty"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gitops-health:", err)
		os.Exit(2)
	}
}

func run(in io.Reader, out io.Writer) error {
	var req input
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	ctx := context.Background()
	// `wait: true`: the generic status reader with kstatus's Compute, as for any custom resource.
	waitReader := fluxstatusreaders.NewGenericStatusReader(nil, fluxstatus.Compute)
	var exprReader engine.StatusReader
	if e := req.FluxHealthCheckExprs; e != nil {
		newReader, err := fluxcel.NewStatusReader([]kustomize.CustomHealthCheck{*e})
		if err != nil {
			return fmt.Errorf("fluxHealthCheckExprs: %w", err)
		}
		exprReader = newReader(nil)
	}
	var argo *argoHealthCheck
	if req.ArgoCDHealthLua != "" {
		var err error
		if argo, err = newArgoHealthCheck(req.ArgoCDHealthLua); err != nil {
			return fmt.Errorf("argocdHealthLua: %w", err)
		}
	}

	result := struct {
		Verdicts []verdicts `json:"verdicts"`
	}{Verdicts: make([]verdicts, 0, len(req.Objects))}
	for i, raw := range req.Objects {
		u := &unstructured.Unstructured{}
		// Decoded as the API machinery decodes what it reads from a server: integers are int64.
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("objects[%d]: %w", i, err)
		}
		v := verdicts{Kstatus: computeKstatus(u), FluxKstatus: readStatus(ctx, waitReader, u)}
		if exprReader != nil {
			if gk := u.GroupVersionKind().GroupKind(); !exprReader.Supports(gk) {
				return fmt.Errorf("objects[%d] is a %s, which fluxHealthCheckExprs is not for", i, gk)
			}
			r := readStatus(ctx, exprReader, u)
			v.FluxHealthCheckExprs = &r
		}
		if argo != nil {
			a := argo.health(u)
			v.ArgoCD = &a
		}
		result.Verdicts = append(result.Verdicts, v)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(result)
}

// computeKstatus is upstream kstatus; an error is Unknown, as kstatus's own readers report it.
func computeKstatus(u *unstructured.Unstructured) verdict {
	res, err := kstatus.Compute(u)
	if err != nil {
		return verdict{Status: string(kstatus.UnknownStatus), Message: err.Error()}
	}
	return verdict{Status: string(res.Status), Message: res.Message}
}

// readStatus asks a Flux status reader about an object already in hand: the reader turns an
// evaluation error into Unknown with the error attached, which is what the controller sees.
func readStatus(ctx context.Context, reader engine.StatusReader, u *unstructured.Unstructured) verdict {
	res, err := reader.ReadStatusForObject(ctx, nil, u)
	if err != nil {
		return verdict{Status: string(fluxstatus.UnknownStatus), Message: err.Error()}
	}
	v := verdict{Status: string(res.Status), Message: res.Message}
	if res.Error != nil {
		v.Message = res.Error.Error()
	}
	return v
}
