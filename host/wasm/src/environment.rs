//! `wasi:cli/environment` answered from the call's own grants.
//!
//! wasmtime-wasi keeps a guest's environment variables in its `WasiCtx`, as owned strings: every store would copy
//! the granted variables (for a built-in, the host's whole environment) and free them again when dropped, whether
//! or not the guest ever asks for them — a trivial call never does. This definition shadows wasmtime-wasi's: it
//! hands out a copy of the call's granted variables (`CallEnv::env`, shared by every call under the same grants)
//! only when the guest asks. The guest sees what it would have: the granted variables in their order, no
//! arguments, no initial working directory.

use wasmtime::component::{HasData, Linker};
use wasmtime_wasi::p2::bindings::cli::environment;

use crate::state::{CallEnv, PluginState};

/// The call a guest's `wasi:cli/environment` request belongs to.
pub struct Environment<'a>(&'a CallEnv);

struct GrantedEnvironment;

impl HasData for GrantedEnvironment {
    type Data<'a> = Environment<'a>;
}

impl environment::Host for Environment<'_> {
    fn get_environment(&mut self) -> wasmtime::Result<Vec<(String, String)>> {
        Ok(self.0.env.as_ref().clone())
    }

    fn get_arguments(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn initial_cwd(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(None)
    }
}

/// Replace wasmtime-wasi's `wasi:cli/environment` in `linker` (added before) with the grants' own.
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    environment::add_to_linker::<PluginState, GrantedEnvironment>(linker, |state| Environment(&state.call))?;
    linker.allow_shadowing(false);
    Ok(())
}
