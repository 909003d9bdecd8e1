//! The runtime layer: [`AgentTool`], what the pipeline runs (pi's `AgentTool`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::ExecutionMode;

use crate::schema::Validator;
use crate::types::AgentToolResult;

/// A boxed, sendable future: what tools and hooks return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use toolwright_sdk::ToolError;

/// Where a running tool sends partial results (pi's `onUpdate`).
///
/// Updates sent after the call settled are ignored, as pi ignores late `onUpdate` calls. Cloning is cheap; a
/// sink from [`UpdateSink::discard`] drops everything.
#[derive(Clone, Default)]
pub struct UpdateSink {
    inner: Option<Arc<UpdateChannel>>,
}

struct UpdateChannel {
    accepting: AtomicBool,
    tx: mpsc::UnboundedSender<AgentToolResult>,
}

impl UpdateSink {
    /// A sink that drops every update.
    pub fn discard() -> Self {
        UpdateSink { inner: None }
    }

    /// Report a partial result. Ignored once the call has settled.
    pub fn update(&self, partial: AgentToolResult) {
        if let Some(inner) = &self.inner
            && inner.accepting.load(Ordering::Acquire)
        {
            // The receiver is gone only after the call settled, when updates are ignored anyway.
            let _ = inner.tx.send(partial);
        }
    }

    /// A connected sink and the receiving end of its updates.
    pub(crate) fn channel() -> (Self, UpdateReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Arc::new(UpdateChannel {
            accepting: AtomicBool::new(true),
            tx,
        });
        (
            UpdateSink {
                inner: Some(inner.clone()),
            },
            UpdateReceiver { inner, rx },
        )
    }
}

impl fmt::Debug for UpdateSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpdateSink")
            .field("connected", &self.inner.is_some())
            .finish()
    }
}

/// The receiving end of an [`UpdateSink`].
pub(crate) struct UpdateReceiver {
    inner: Arc<UpdateChannel>,
    pub(crate) rx: mpsc::UnboundedReceiver<AgentToolResult>,
}

impl UpdateReceiver {
    /// Stop accepting updates; the ones already sent can still be drained.
    pub(crate) fn close(&mut self) {
        self.inner.accepting.store(false, Ordering::Release);
        self.rx.close();
    }
}

/// One execution of a tool: what `execute` receives.
#[derive(Debug, Clone)]
pub struct ToolExecution {
    /// The tool call id.
    pub call_id: String,
    /// The validated (possibly coerced, possibly hook-rewritten) arguments.
    pub params: Value,
    /// Cancelled when the batch is aborted; long-running tools should watch it.
    pub cancel: CancellationToken,
    /// Where partial results go.
    pub updates: UpdateSink,
}

/// The code behind an [`AgentTool`]: does the work of one call.
///
/// Return `Err` to "throw" (the error's message becomes the result text), or `Ok` with `is_error` set to return
/// an error result that keeps its details. Any `Fn(ToolExecution) -> impl Future` closure is an executor.
pub trait ToolExecutor: Send + Sync {
    /// Run one call.
    fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<AgentToolResult, ToolError>>;
}

impl<F, Fut> ToolExecutor for F
where
    F: Fn(ToolExecution) -> Fut + Send + Sync,
    Fut: Future<Output = Result<AgentToolResult, ToolError>> + Send + 'static,
{
    fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<AgentToolResult, ToolError>> {
        Box::pin(self(run))
    }
}

/// A compatibility shim run on the raw arguments before validation (pi's `prepareArguments`).
pub type PrepareArguments = Arc<dyn Fn(&Value) -> Result<Value, ToolError> + Send + Sync>;

/// A tool as the pipeline runs it (pi's `AgentTool`): a declaration plus the code that executes it.
///
/// It knows nothing of prompts, exposure or UI; see [`crate::ToolDefinition`] for those. Cloning is cheap.
#[derive(Clone)]
pub struct AgentTool {
    name: String,
    label: String,
    description: String,
    parameters: Value,
    constrained_sampling: Option<Value>,
    output_schema: Option<Value>,
    execution_mode: Option<ExecutionMode>,
    prepare_arguments: Option<PrepareArguments>,
    executor: Arc<dyn ToolExecutor>,
    validator: Arc<OnceLock<Validator>>,
}

impl AgentTool {
    /// A tool named `name` with its model-visible description, its JSON Schema parameters and its executor. The
    /// label defaults to the name.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        executor: impl ToolExecutor + 'static,
    ) -> Self {
        Self::from_executor(name.into(), description.into(), parameters, Arc::new(executor))
    }

    pub(crate) fn from_executor(
        name: String,
        description: String,
        parameters: Value,
        executor: Arc<dyn ToolExecutor>,
    ) -> Self {
        AgentTool {
            label: name.clone(),
            name,
            description,
            parameters,
            constrained_sampling: None,
            output_schema: None,
            execution_mode: None,
            prepare_arguments: None,
            executor,
            validator: Arc::new(OnceLock::new()),
        }
    }

    /// This tool with a UI label.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// This tool with another model-visible description (a loadout override); the code is shared.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// This tool with an output schema for `structuredContent`.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// This tool with a constrained-sampling request (pi's `constrainedSampling`), passed through to providers.
    pub fn with_constrained_sampling(mut self, request: Value) -> Self {
        self.constrained_sampling = Some(request);
        self
    }

    /// This tool with an execution mode; `Sequential` makes every batch it is in run sequentially.
    pub fn with_execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.execution_mode = Some(mode);
        self
    }

    /// This tool with an argument shim run before validation.
    pub fn with_prepare_arguments(
        mut self,
        prepare: impl Fn(&Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.prepare_arguments = Some(Arc::new(prepare));
        self
    }

    pub(crate) fn with_prepare_arguments_shared(mut self, prepare: Option<PrepareArguments>) -> Self {
        self.prepare_arguments = prepare;
        self
    }

    /// The name the model calls.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The UI label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The model-visible description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The parameters' JSON Schema.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }

    /// The constrained-sampling request, if any.
    pub fn constrained_sampling(&self) -> Option<&Value> {
        self.constrained_sampling.as_ref()
    }

    /// The output schema, if any.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// The execution mode, if the tool sets one.
    pub fn execution_mode(&self) -> Option<ExecutionMode> {
        self.execution_mode
    }

    /// The argument shim, if any.
    pub fn prepare_arguments(&self) -> Option<&PrepareArguments> {
        self.prepare_arguments.as_ref()
    }

    /// The executor.
    pub fn executor(&self) -> &Arc<dyn ToolExecutor> {
        &self.executor
    }

    /// The validator of the parameters, compiled on first use and shared by clones.
    pub fn validator(&self) -> &Validator {
        self.validator
            .get_or_init(|| Validator::new(self.parameters.clone()))
    }

    /// Run the tool directly, outside the pipeline (no validation, no hooks, no events).
    pub fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<AgentToolResult, ToolError>> {
        self.executor.execute(run)
    }
}

impl fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.name)
            .field("label", &self.label)
            .field("execution_mode", &self.execution_mode)
            .finish_non_exhaustive()
    }
}
