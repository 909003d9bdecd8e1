//! `wasi:io`'s blocking calls, bounded by the call's deadline and cancellation.
//!
//! The epoch that stops a busy loop only fires while wasm code runs. A plugin blocked inside the host (sleeping
//! through `poll` or `pollable.block`, waiting in a `blocking-read` on a stream) would outlive its deadline.
//! These definitions shadow wasmtime-wasi's synchronous `wasi:io/poll` and `wasi:io/streams`: each blocking
//! call runs wasmtime-wasi-io's own (async) implementation under a race with the call's cancellation and
//! deadline. Past the deadline it traps with the epoch callback's cause; on cancellation a wait on pollables
//! returns as if they were ready (so a cooperative plugin sees `is-cancelled` and winds down, and the epoch
//! callback stops one that does not), and a stream operation traps. Non-blocking calls are passed straight
//! through.

use std::future::Future;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::runtime::in_tokio;
use wasmtime_wasi_io::bindings::wasi::io::poll as async_poll;
use wasmtime_wasi_io::bindings::wasi::io::streams::{
    Host as AsyncStreams, HostInputStream as AsyncInput, HostOutputStream as AsyncOutput,
};
use wasmtime_wasi_io::poll::DynPollable;
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream, StreamError};

use super::state::{CallEnv, PluginState};

/// The resource table and the call it belongs to.
pub struct Bounded<'a> {
    table: &'a mut ResourceTable,
    call: &'a CallEnv,
}

struct BoundedIo;

impl HasData for BoundedIo {
    type Data<'a> = Bounded<'a>;
}

/// Replace wasmtime-wasi's `wasi:io/poll` and `wasi:io/streams` in `linker` (added before) with the bounded ones.
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    fn bounded(state: &mut PluginState) -> Bounded<'_> {
        Bounded {
            table: &mut state.table,
            call: &state.call,
        }
    }
    linker.allow_shadowing(true);
    poll::add_to_linker::<PluginState, BoundedIo>(linker, bounded)?;
    streams::add_to_linker::<PluginState, BoundedIo>(linker, bounded)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// How a bounded blocking call ended.
enum Ended<T> {
    /// It finished.
    Done(T),
    /// The call was cancelled first.
    Cancelled,
}

/// Run `work` on the runtime until it finishes or the call is cancelled. Past the call's deadline it traps,
/// as the epoch callback would.
fn bounded<T>(call: &CallEnv, work: impl Future<Output = T>) -> Result<Ended<T>, wasmtime::Error> {
    let finished = in_tokio(async {
        let mut work = std::pin::pin!(work);
        // Most calls are ready at once (a file read, a write to a pipe): no timer for them.
        if let std::task::Poll::Ready(out) = futures::poll!(work.as_mut()) {
            return Some(out);
        }
        tokio::select! {
            biased;
            out = work => Some(out),
            () = call.stopped() => None,
        }
    });
    match finished {
        Some(out) => Ok(Ended::Done(out)),
        None if call.cancel.is_cancelled() => Ok(Ended::Cancelled),
        None => Err(call.interrupted()),
    }
}

/// [`bounded`] where a cancelled call traps too (a half-done stream operation cannot be reported as done).
fn bounded_or_trap<T>(call: &CallEnv, work: impl Future<Output = T>) -> Result<T, wasmtime::Error> {
    match bounded(call, work)? {
        Ended::Done(out) => Ok(out),
        Ended::Cancelled => Err(call.interrupted()),
    }
}

/// [`bounded_or_trap`] for calls whose errors are stream errors (a trap travels as [`StreamError::Trap`]).
fn bounded_stream<T>(
    call: &CallEnv,
    work: impl Future<Output = Result<T, StreamError>>,
) -> Result<T, StreamError> {
    bounded_or_trap(call, work).map_err(StreamError::Trap)?
}

// A cancelled call's waits end at once, as if what they wait for were ready: the plugin runs on, sees
// `is-cancelled`, and can wind down (kill its processes, report what it has) before the epoch callback stops
// it a tick later. A deadline stops it outright.
impl poll::Host for Bounded<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        let all = (0..u32::try_from(pollables.len()).unwrap_or(u32::MAX)).collect();
        match bounded(self.call, async_poll::Host::poll(self.table, pollables))? {
            Ended::Done(ready) => ready,
            Ended::Cancelled => Ok(all),
        }
    }
}

impl poll::HostPollable for Bounded<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        match bounded(self.call, async_poll::HostPollable::ready(self.table, pollable))? {
            Ended::Done(ready) => ready,
            Ended::Cancelled => Ok(true),
        }
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        match bounded(self.call, async_poll::HostPollable::block(self.table, pollable))? {
            Ended::Done(done) => done,
            Ended::Cancelled => Ok(()),
        }
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.table, pollable)
    }
}

impl streams::Host for Bounded<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        Ok(match AsyncStreams::convert_stream_error(self.table, err)? {
            wasmtime_wasi_io::bindings::wasi::io::streams::StreamError::LastOperationFailed(e) => {
                streams::StreamError::LastOperationFailed(e)
            }
            wasmtime_wasi_io::bindings::wasi::io::streams::StreamError::Closed => {
                streams::StreamError::Closed
            }
        })
    }
}

impl streams::HostOutputStream for Bounded<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        bounded_or_trap(self.call, AsyncOutput::drop(self.table, stream))?
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> Result<u64, StreamError> {
        AsyncOutput::check_write(self.table, stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> Result<(), StreamError> {
        AsyncOutput::write(self.table, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> Result<(), StreamError> {
        bounded_stream(
            self.call,
            AsyncOutput::blocking_write_and_flush(self.table, stream, bytes),
        )
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> Result<(), StreamError> {
        bounded_stream(
            self.call,
            AsyncOutput::blocking_write_zeroes_and_flush(self.table, stream, len),
        )
    }

    fn subscribe(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<Resource<DynPollable>> {
        AsyncOutput::subscribe(self.table, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> Result<(), StreamError> {
        AsyncOutput::write_zeroes(self.table, stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> Result<(), StreamError> {
        AsyncOutput::flush(self.table, stream)
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> Result<(), StreamError> {
        bounded_stream(self.call, AsyncOutput::blocking_flush(self.table, stream))
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> Result<u64, StreamError> {
        AsyncOutput::splice(self.table, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> Result<u64, StreamError> {
        bounded_stream(self.call, AsyncOutput::blocking_splice(self.table, dst, src, len))
    }
}

impl streams::HostInputStream for Bounded<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        bounded_or_trap(self.call, AsyncInput::drop(self.table, stream))?
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> Result<Vec<u8>, StreamError> {
        AsyncInput::read(self.table, stream, len)
    }

    fn blocking_read(&mut self, stream: Resource<DynInputStream>, len: u64) -> Result<Vec<u8>, StreamError> {
        bounded_stream(self.call, AsyncInput::blocking_read(self.table, stream, len))
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> Result<u64, StreamError> {
        AsyncInput::skip(self.table, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> Result<u64, StreamError> {
        bounded_stream(self.call, AsyncInput::blocking_skip(self.table, stream, len))
    }

    fn subscribe(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<Resource<DynPollable>> {
        AsyncInput::subscribe(self.table, stream)
    }
}
