// The few fengari (a Lua 5.3 VM in JavaScript) entry points the Argo CD health check test uses;
// the package ships no types.
declare module "fengari" {
  /** An opaque Lua state. */
  type LuaState = { readonly __luaState: unique symbol };
  const fengari: {
    lua: {
      LUA_OK: number;
      lua_pcall(L: LuaState, nargs: number, nresults: number, msgh: number): number;
      lua_tojsstring(L: LuaState, index: number): string;
    };
    lauxlib: {
      luaL_newstate(): LuaState;
      luaL_loadstring(L: LuaState, source: Uint8Array): number;
    };
    lualib: { luaL_openlibs(L: LuaState): void };
    to_luastring(text: string): Uint8Array;
  };
  export default fengari;
}
