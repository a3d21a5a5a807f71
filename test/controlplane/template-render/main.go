// template-render renders a GitOps tool's template the way that tool does, for the tests of
// docs/previews.md: the recipes' templates are run through the same Go text/template, function
// libraries and options as the engines, not through a string replacement of our own.
//
// Input (stdin, JSON): {"engine": "argocd-applicationset" | "flux-resourceset", "template": <object>,
// "params": <object>, "goTemplateOptions": ["missingkey=error"]}. Output (stdout, JSON):
// {"object": <the rendered object>}. A template that does not parse or execute exits 1 with the
// engine's error on stderr.
//
//   - argocd-applicationset: an ApplicationSet's `spec.template` (an Application) with
//     `goTemplate: true`. As the ApplicationSet controller does, every string of the object, map
//     keys included, is a template of its own, parsed with text/template and sprig's
//     GenericFuncMap (without env, expandenv and getHostByName), with the ApplicationSet's
//     `goTemplateOptions`, and executed on the generator's parameters.
//   - flux-resourceset: one entry of a ResourceSet's `spec.resources`. As the Flux Operator does,
//     the object (as the API server stores it, JSON) is turned into YAML with sigs.k8s.io/yaml,
//     parsed as one text/template with the delimiters << and >>, slim-sprig's HermeticTxtFuncMap,
//     slugify (gosimple/slug, 63 characters, smart truncation), toYaml, and `inputs` returning the
//     input set, with missingkey=error; the result is read back as YAML.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	slimsprig "github.com/go-task/slim-sprig/v3"
	"github.com/gosimple/slug"
	"sigs.k8s.io/yaml"
)

type input struct {
	Engine            string         `json:"engine"`
	Template          any            `json:"template"`
	Params            map[string]any `json:"params"`
	GoTemplateOptions []string       `json:"goTemplateOptions"`
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fail(fmt.Errorf("input: %w", err))
	}
	var out any
	switch in.Engine {
	case "argocd-applicationset":
		out, err = renderArgo(in.Template, in.Params, in.GoTemplateOptions)
	case "flux-resourceset":
		out, err = renderFlux(in.Template, in.Params)
	default:
		err = fmt.Errorf("engine: want argocd-applicationset or flux-resourceset, got %q", in.Engine)
	}
	if err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"object": out}); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// argoFuncs is the ApplicationSet controller's function map as far as sprig goes; its own
// additions (normalize, slugify, toYaml, fromYaml, fromYamlArray) are left out, so a recipe using
// one fails here with "function not defined" rather than passing untested.
func argoFuncs() template.FuncMap {
	funcs := sprig.GenericFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	delete(funcs, "getHostByName")
	return funcs
}

func renderArgo(value any, params map[string]any, options []string) (any, error) {
	funcs := argoFuncs()
	replace := func(text string) (string, error) {
		tmpl, err := template.New("").Funcs(funcs).Parse(text)
		if err != nil {
			return "", fmt.Errorf("failed to parse template %s: %w", text, err)
		}
		for _, option := range options {
			tmpl = tmpl.Option(option)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, params); err != nil {
			return "", fmt.Errorf("failed to execute go template %s: %w", text, err)
		}
		return buf.String(), nil
	}
	var walk func(any) (any, error)
	walk = func(v any) (any, error) {
		switch t := v.(type) {
		case string:
			return replace(t)
		case []any:
			out := make([]any, len(t))
			for i, item := range t {
				rendered, err := walk(item)
				if err != nil {
					return nil, err
				}
				out[i] = rendered
			}
			return out, nil
		case map[string]any:
			out := make(map[string]any, len(t))
			for key, item := range t {
				rendered, err := walk(item)
				if err != nil {
					return nil, err
				}
				renderedKey, err := replace(key)
				if err != nil {
					return nil, err
				}
				out[renderedKey] = rendered
			}
			return out, nil
		default:
			return v, nil
		}
	}
	return walk(value)
}

func renderFlux(value any, inputs map[string]any) (any, error) {
	stored, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	text, err := yaml.JSONToYAML(stored)
	if err != nil {
		return nil, fmt.Errorf("failed to convert template to YAML: %w", err)
	}
	slug.MaxLength = 63
	slug.EnableSmartTruncate = true
	tmpl, err := template.New("resourceset").
		Delims("<<", ">>").
		Funcs(slimsprig.HermeticTxtFuncMap()).
		Funcs(template.FuncMap{"slugify": slug.Make}).
		Funcs(template.FuncMap{"inputs": func() any { return inputs }}).
		Funcs(template.FuncMap{"toYaml": toYaml}).
		Option("missingkey=error").
		Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("failed to parse template: %w", err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		return nil, fmt.Errorf("failed to execute template: %w", err)
	}
	var object any
	if err := yaml.Unmarshal([]byte(b.String()), &object); err != nil {
		return nil, fmt.Errorf("failed to read object: %w", err)
	}
	return object, nil
}

func toYaml(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
