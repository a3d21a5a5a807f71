// Builds kargo-expr, which evaluates Kargo `http` step expressions with the engine Kargo uses
// (expr-lang/expr, at the version Kargo pins), for the tests of docs/guide/promotion.md.
module dms-operator/test/controlplane/kargo-expr

go 1.24.0

require github.com/expr-lang/expr v1.17.8
