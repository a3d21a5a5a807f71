// Command kargo-expr evaluates the success and failure expressions of a Kargo `http` promotion
// step against HTTP responses, with the expression engine Kargo uses (github.com/expr-lang/expr)
// and the environment its step builds: `response.status` (an int64), `response.header(name)`,
// `response.headers`, and `response.body` (the JSON body, or an empty map). The step's outcome
// follows the step's documented rules: failure met → Failed, success met → Succeeded, neither
// expression given → by status code, otherwise Running (polled again).
//
// Input on stdin: {"successExpression": "...", "failureExpression": "...",
//   "responses": [{"status": 200, "headers": {"Content-Type": ["application/json"]}, "body": "..."}]}
// Output on stdout: {"results": [{"success": bool|null, "failure": bool|null, "outcome": "...", "error": "..."}]}
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/expr-lang/expr"
)

type response struct {
	Status  int64               `json:"status"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

type input struct {
	SuccessExpression string     `json:"successExpression"`
	FailureExpression string     `json:"failureExpression"`
	Responses         []response `json:"responses"`
}

type result struct {
	Success *bool  `json:"success"`
	Failure *bool  `json:"failure"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

func env(r response) (map[string]any, error) {
	header := http.Header{}
	for name, values := range r.Headers {
		for _, v := range values {
			header.Add(name, v)
		}
	}
	resp := map[string]any{
		"status":  r.Status,
		"header":  header.Get,
		"headers": header,
		"body":    map[string]any{},
	}
	if r.Body != "" && json.Valid([]byte(r.Body)) {
		var parsed any
		if err := json.Unmarshal([]byte(r.Body), &parsed); err != nil {
			return nil, err
		}
		switch parsed.(type) {
		case map[string]any, []any:
			resp["body"] = parsed
		default:
			return nil, fmt.Errorf("unexpected type when unmarshaling response: %T", parsed)
		}
	}
	return map[string]any{"response": resp}, nil
}

func evaluate(source string, e map[string]any) (*bool, error) {
	if source == "" {
		return nil, nil
	}
	program, err := expr.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("compiling %q: %w", source, err)
	}
	value, err := expr.Run(program, e)
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", source, err)
	}
	b, ok := value.(bool)
	if !ok {
		return nil, fmt.Errorf("%q did not evaluate to a boolean (got %T)", source, value)
	}
	return &b, nil
}

func judge(in input, r response) result {
	e, err := env(r)
	if err != nil {
		return result{Outcome: "Errored", Error: err.Error()}
	}
	success, err := evaluate(in.SuccessExpression, e)
	if err != nil {
		return result{Outcome: "Errored", Error: err.Error()}
	}
	failure, err := evaluate(in.FailureExpression, e)
	if err != nil {
		return result{Success: success, Outcome: "Errored", Error: err.Error()}
	}
	out := result{Success: success, Failure: failure}
	switch {
	case failure != nil && *failure:
		out.Outcome = "Failed"
	case success != nil && *success:
		out.Outcome = "Succeeded"
	case success == nil && failure == nil:
		if r.Status >= 200 && r.Status < 300 {
			out.Outcome = "Succeeded"
		} else {
			out.Outcome = "Failed"
		}
	default:
		out.Outcome = "Running"
	}
	return out
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "kargo-expr: reading input: %v\n", err)
		os.Exit(2)
	}
	results := make([]result, 0, len(in.Responses))
	for _, r := range in.Responses {
		results = append(results, judge(in, r))
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"results": results}); err != nil {
		fmt.Fprintf(os.Stderr, "kargo-expr: writing output: %v\n", err)
		os.Exit(2)
	}
}
