package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	luajson "layeh.com/gopher-json"
)

// argoHealthCheck runs a health script the way Argo CD runs a `resource.customizations.health.*`
// entry of argocd-cm (argo-cd util/lua, gitops-engine pkg/health), with the defaults a user gets:
//
//   - a fresh state without the standard libraries (`useOpenLibs` is off unless argocd-cm turns
//     it on), then only `package`, `base`, `table`, and an `os` that has nothing but `time` and
//     `date` (also for `require("os")`): no `string`, `math`, `io`;
//   - the object as the global `obj`, JSON numbers as Lua numbers, `null` as nil;
//   - one second of run time;
//   - the returned table encoded to JSON and read as {status, message}; a status outside
//     Argo CD's list becomes Unknown "Lua returned an invalid health status"; a script error
//     becomes Unknown with the error as the message;
//   - an object with a deletionTimestamp is Progressing "Pending deletion" before any script runs.
type argoHealthCheck struct {
	proto *lua.FunctionProto
}

// The statuses Argo CD accepts from a health script.
var argoStatuses = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func newArgoHealthCheck(script string) (*argoHealthCheck, error) {
	chunk, err := parse.Parse(strings.NewReader(script), "<argocd-cm health>")
	if err != nil {
		return nil, err
	}
	proto, err := lua.Compile(chunk, "<argocd-cm health>")
	if err != nil {
		return nil, err
	}
	return &argoHealthCheck{proto: proto}, nil
}

func (a *argoHealthCheck) health(u *unstructured.Unstructured) verdict {
	if u.GetDeletionTimestamp() != nil {
		return verdict{Status: "Progressing", Message: "Pending deletion"}
	}
	v, err := a.run(u)
	if err != nil {
		return verdict{Status: "Unknown", Message: err.Error()}
	}
	return v
}

func (a *argoHealthCheck) run(u *unstructured.Unstructured) (verdict, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, lua.OpenOs},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return verdict{}, fmt.Errorf("opening %q: %w", lib.name, err)
		}
	}
	// Argo CD's os offers the clock and nothing else.
	osTable := l.NewTable()
	for _, name := range []string{"time", "date"} {
		osTable.RawSetString(name, l.GetField(l.GetGlobal(lua.OsLibName), name))
	}
	l.SetGlobal(lua.OsLibName, osTable)
	l.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(osTable)
		return 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, u.Object))
	l.Push(l.NewFunctionFromProto(a.proto))
	if err := l.PCall(0, lua.MultRet, nil); err != nil {
		var apiErr *lua.ApiError
		if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
			apiErr.StackTrace = ""
		}
		return verdict{}, err
	}
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return verdict{}, nil
	case lua.LTTable:
	default:
		return verdict{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	encoded, err := luajson.Encode(ret)
	if err != nil {
		return verdict{}, err
	}
	var hs verdict
	if err := json.Unmarshal(encoded, &hs); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Value == "array" {
			return verdict{}, nil // an empty table encodes as []
		}
		return verdict{}, err
	}
	if !argoStatuses[hs.Status] {
		return verdict{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return hs, nil
}

// toLua converts a decoded object as Argo CD does: numbers (int64 from the API machinery, or
// float64) become Lua numbers, arrays become sequences, objects tables, null nil.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetH(lua.LString(key), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}
