// Builds template-render, which renders Argo CD ApplicationSet and Flux Operator ResourceSet
// templates with the engines' own template language and function libraries, for the tests of
// docs/previews.md. No source of theirs is copied.
module dms-operator/test/controlplane/template-render

go 1.24.0

require (
	github.com/Masterminds/sprig/v3 v3.3.0
	github.com/go-task/slim-sprig/v3 v3.0.0
	github.com/gosimple/slug v1.15.0
	sigs.k8s.io/yaml v1.4.0
)

require (
	dario.cat/mergo v1.0.1 // indirect
	github.com/Masterminds/goutils v1.1.1 // indirect
	github.com/Masterminds/semver/v3 v3.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gosimple/unidecode v1.0.1 // indirect
	github.com/huandu/xstrings v1.5.0 // indirect
	github.com/mitchellh/copystructure v1.2.0 // indirect
	github.com/mitchellh/reflectwalk v1.0.2 // indirect
	github.com/shopspring/decimal v1.4.0 // indirect
	github.com/spf13/cast v1.7.0 // indirect
	golang.org/x/crypto v0.26.0 // indirect
)
