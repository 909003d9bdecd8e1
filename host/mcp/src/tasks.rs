//! Long calls as tasks: the `io.modelcontextprotocol/tasks` extension (SEP-2663) for `tools/call`.
//!
//! A 2026-07-28 request that declares the extension (in `_meta["io.modelcontextprotocol/clientCapabilities"]`)
//! and calls a long-running tool ([`runs_as_task`]: `bash`, `codemode`, a plugin's or an MCP server's tool) gets a
//! `CreateTaskResult` at once; the call runs on, through the same pipeline as any other, and the client polls
//! `tasks/get` (the result is inline once `completed`) or cancels it with `tasks/cancel` (the call is cancelled:
//! its processes are killed, and the task ends `cancelled`).
//!
//! `Tasks` is the store, owned by the server: every task is bound to its `Owner` ("stateless" for 2026-07-28
//! requests, whose unguessable id is then the only key; a session, for a client that completed a handshake),
//! and another owner asking for it is told it does not exist. What it keeps is bounded ([`TaskLimits`]): a task and its
//! result live for the TTL from their creation (a call still running then is cancelled); at most `max_tasks` are
//! kept, the oldest finished one dropped to make room and a new task refused while all are running; results
//! take at most `max_result_bytes` together, the oldest finished ones dropped first, and a single result larger
//! than that is replaced by an error.
//!
//! A task's plugin may ask the client (`ask`, `crate::input`): the call stops at its first unanswered question,
//! the task turns `input_required` with the questions as its `inputRequests`, and `tasks/update` brings the
//! answers (`Tasks::update`); once every question of the round is answered, the call runs again from the start
//! with all the answers so far, and the task is `working` again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// What the server keeps of tasks, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct TaskLimits {
    /// How long a task and its result are kept after its creation ([`DEFAULT_TASK_TTL`]); a call still running
    /// then is cancelled.
    pub ttl: Duration,
    /// At most this many tasks, running or finished ([`DEFAULT_MAX_TASKS`]).
    pub max_tasks: usize,
    /// At most this many bytes of finished results, together ([`DEFAULT_MAX_RESULT_BYTES`]).
    pub max_result_bytes: usize,
    /// How often the client is asked to poll.
    pub poll_interval: Duration,
}

/// The default TTL of a task: a long build fits, and a forgotten result does not stay all day.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);

/// The default bound on tasks kept: far more than a client runs at once.
pub const DEFAULT_MAX_TASKS: usize = 100;

/// The default bound on the finished results kept, together: 64 MiB (a bash result is cut at 50 KiB, a
/// plugin's at its own bound).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 64 << 20;

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            ttl: DEFAULT_TASK_TTL,
            max_tasks: DEFAULT_MAX_TASKS,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// Whose a task is: only its owner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The HTTP session (or stdio connection) of a client that completed the handshake.
    Session(u64),
    /// 2026-07-28's stateless requests: whoever knows the task's id.
    Stateless,
}

/// Whether a call of this tool runs as a task for a client that accepts tasks: the tools that may run for
/// minutes, as the tool says (`long-running` in its declaration), else `bash`, `codemode` and every plugin's or
/// MCP server's tool. Quick built-ins (`read`, `edit`, `grep`…) answer at once, as the extension lets a server
/// choose.
pub fn runs_as_task(definition: &toolwright_core::definition::ToolDefinition) -> bool {
    use toolwright_core::definition::ToolSource;
    let by_default = matches!(definition.name.as_str(), "bash" | "codemode")
        || matches!(
            definition.source,
            ToolSource::Plugin { .. } | ToolSource::Mcp { .. }
        );
    definition.long_running.unwrap_or(by_default)
}

/// How a task's call ended.
pub(crate) enum Ending {
    /// The call's result (maybe `isError`), as the client would have got it.
    Result(Value),
    /// The call failed with a protocol error.
    Error(ErrorData),
}

/// The questions a task waits on, the answers `tasks/update` brought so far, and where they go once all are in.
struct Awaiting {
    questions: Vec<toolwright_core::client::InputRequest>,
    answers: std::collections::BTreeMap<String, Value>,
    resume: tokio::sync::oneshot::Sender<std::collections::BTreeMap<String, Value>>,
}

struct Entry {
    owner: Owner,
    task: Task,
    /// Set once the call ended.
    payload: Option<TaskPayload>,
    /// While its call waits for answers from the client.
    awaiting: Option<Awaiting>,
    /// The size of the result kept, in bytes.
    bytes: usize,
    created: Instant,
    finished: Option<Instant>,
    /// Cancels the call.
    cancel: CancellationToken,
    cancel_requested: bool,
}

/// The tasks of a server ([`crate::McpServer`] owns it).
pub(crate) struct Tasks {
    limits: TaskLimits,
    entries: Mutex<HashMap<String, Entry>>,
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// 128 random bits from the kernel, as hex: the id is the only key a stateless client has.
fn task_id() -> Result<String, ErrorData> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        filled += rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())
            .map_err(|e| ErrorData::internal_error(format!("cannot make a task id: {e}"), None))?;
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn not_found(id: &str) -> ErrorData {
    // SEP-2663: an unknown task id is invalid params; another owner's is unknown to the asker.
    ErrorData::invalid_params(format!("unknown task: {id}"), None)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Tasks {
    pub(crate) fn new(limits: TaskLimits) -> Self {
        Tasks {
            limits,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn limits(&self) -> TaskLimits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drop the tasks past their TTL, cancelling the calls still running.
    fn sweep(&self, entries: &mut HashMap<String, Entry>) {
        let ttl = self.limits.ttl;
        entries.retain(|id, entry| {
            let alive = entry.created.elapsed() < ttl;
            if !alive {
                tracing::debug!(task = %id, "task expired");
                entry.cancel.cancel();
            }
            alive
        });
    }

    /// The oldest finished task not `except`, if any.
    fn oldest_finished(entries: &HashMap<String, Entry>, except: &str) -> Option<String> {
        entries
            .iter()
            .filter(|(id, e)| e.finished.is_some() && id.as_str() != except)
            .min_by_key(|(_, e)| e.finished)
            .map(|(id, _)| id.clone())
    }

    /// A new task of `owner` whose call `cancel` cancels; refused while `max_tasks` are running.
    pub(crate) fn create(&self, owner: Owner, cancel: CancellationToken) -> Result<Task, ErrorData> {
        let id = task_id()?;
        let mut entries = self.lock();
        self.sweep(&mut entries);
        while entries.len() >= self.limits.max_tasks {
            let Some(oldest) = Self::oldest_finished(&entries, "") else {
                return Err(ErrorData::internal_error(
                    format!(
                        "too many tasks: {} are running, the most this server keeps; wait for one to finish or \
                         cancel one",
                        entries.len()
                    ),
                    None,
                ));
            };
            entries.remove(&oldest);
        }
        let stamp = now();
        let task = Task::new(id.clone(), TaskStatus::Working, stamp.clone(), stamp)
            .with_ttl_ms(millis(self.limits.ttl))
            .with_poll_interval_ms(millis(self.limits.poll_interval));
        entries.insert(
            id,
            Entry {
                owner,
                task: task.clone(),
                payload: None,
                awaiting: None,
                bytes: 0,
                created: Instant::now(),
                finished: None,
                cancel,
                cancel_requested: false,
            },
        );
        Ok(task)
    }

    /// Record how task `id`'s call ended (a task that expired meanwhile is gone: nothing is kept).
    pub(crate) fn finish(&self, id: &str, ending: Ending) {
        let mut entries = self.lock();
        let Some(entry) = entries.get(id) else {
            return;
        };
        let cancelled = entry.cancel_requested;
        let (payload, bytes) = match ending {
            Ending::Result(_) | Ending::Error(_) if cancelled => (TaskPayload::Cancelled, 0),
            Ending::Result(Value::Object(result)) => {
                let bytes = serde_json::to_vec(&result).map_or(0, |b| b.len());
                if bytes > self.limits.max_result_bytes {
                    let error = ErrorData::internal_error(
                        format!(
                            "the result ({bytes} bytes) is larger than the {} bytes of results this server keeps",
                            self.limits.max_result_bytes
                        ),
                        None,
                    );
                    (
                        TaskPayload::Failed {
                            error: error_object(&error),
                        },
                        0,
                    )
                } else {
                    (TaskPayload::Completed { result }, bytes)
                }
            }
            Ending::Result(other) => {
                let error =
                    ErrorData::internal_error(format!("the call returned no result object: {other}"), None);
                (
                    TaskPayload::Failed {
                        error: error_object(&error),
                    },
                    0,
                )
            }
            Ending::Error(error) => (
                TaskPayload::Failed {
                    error: error_object(&error),
                },
                0,
            ),
        };
        // Room for this result: the oldest finished results go first.
        let mut kept: usize = entries.values().map(|e| e.bytes).sum();
        while kept + bytes > self.limits.max_result_bytes {
            let Some(oldest) = Self::oldest_finished(&entries, id) else {
                break;
            };
            kept -= entries.remove(&oldest).map_or(0, |e| e.bytes);
        }
        if let Some(entry) = entries.get_mut(id) {
            entry.awaiting = None;
            entry.task.status = payload.status();
            entry.task.status_message = None;
            entry.task.last_updated_at = now();
            entry.payload = Some(payload);
            entry.bytes = bytes;
            entry.finished = Some(Instant::now());
        }
    }

    /// Task `id` of `owner`, after the expired ones are dropped; another owner's is unknown to the asker.
    fn owned<'a>(
        &self,
        entries: &'a mut HashMap<String, Entry>,
        owner: Owner,
        id: &str,
    ) -> Result<&'a mut Entry, ErrorData> {
        self.sweep(entries);
        entries
            .get_mut(id)
            .filter(|e| e.owner == owner)
            .ok_or_else(|| not_found(id))
    }

    /// `tasks/get`: the task as `owner` may see it.
    pub(crate) fn get(&self, owner: Owner, id: &str) -> Result<DetailedTask, ErrorData> {
        let mut entries = self.lock();
        let entry = self.owned(&mut entries, owner, id)?;
        let payload = match (&entry.payload, &entry.awaiting) {
            (Some(payload), _) => payload.clone(),
            (None, Some(awaiting)) => TaskPayload::InputRequired {
                input_requests: crate::input::input_requests(&awaiting.questions),
            },
            (None, None) => TaskPayload::Working,
        };
        Ok(DetailedTask::new(entry.task.clone(), payload))
    }

    /// The call of task `id` stopped at `questions` for the client: the task is `input_required` until
    /// `tasks/update` has answered every one of them; then the answers come through the receiver (dropped: the
    /// task is gone or was cancelled).
    pub(crate) fn await_input(
        &self,
        id: &str,
        questions: Vec<toolwright_core::client::InputRequest>,
    ) -> tokio::sync::oneshot::Receiver<std::collections::BTreeMap<String, Value>> {
        let (resume, answered) = tokio::sync::oneshot::channel();
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(id)
            && !entry.cancel_requested
        {
            entry.task.status = TaskStatus::InputRequired;
            entry.task.last_updated_at = now();
            entry.awaiting = Some(Awaiting {
                questions,
                answers: std::collections::BTreeMap::new(),
                resume,
            });
        }
        answered
    }

    /// `tasks/update`: answers to the questions task `id` waits on (keys it did not ask are ignored). A question
    /// answered leaves `inputRequests`; once none is left, the call runs again and the task is `working`.
    pub(crate) fn update(
        &self,
        owner: Owner,
        id: &str,
        responses: Option<&std::collections::BTreeMap<String, Value>>,
    ) -> Result<(), ErrorData> {
        let mut entries = self.lock();
        let entry = self.owned(&mut entries, owner, id)?;
        let Some(awaiting) = entry.awaiting.as_mut() else {
            return Ok(());
        };
        for (key, answer) in responses.into_iter().flatten() {
            if let Some(at) = awaiting.questions.iter().position(|q| q.key == *key) {
                awaiting.questions.remove(at);
                awaiting.answers.insert(key.clone(), answer.clone());
            }
        }
        entry.task.last_updated_at = now();
        if awaiting.questions.is_empty()
            && let Some(awaiting) = entry.awaiting.take()
        {
            entry.task.status = TaskStatus::Working;
            let _ = awaiting.resume.send(awaiting.answers);
        }
        Ok(())
    }

    /// `tasks/cancel`: cancel the task's call; the task ends `cancelled` once the call has stopped (its
    /// processes killed). A finished task stays as it is.
    pub(crate) fn cancel(&self, owner: Owner, id: &str) -> Result<(), ErrorData> {
        let mut entries = self.lock();
        let entry = self.owned(&mut entries, owner, id)?;
        if entry.payload.is_none() {
            entry.awaiting = None;
            entry.cancel_requested = true;
            entry.task.status_message = Some("cancelling".into());
            entry.task.last_updated_at = now();
            entry.cancel.cancel();
        }
        Ok(())
    }

    /// How many tasks are kept, running or finished.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

fn error_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(max_tasks: usize, max_result_bytes: usize, ttl: Duration) -> TaskLimits {
        TaskLimits {
            ttl,
            max_tasks,
            max_result_bytes,
            poll_interval: Duration::from_millis(100),
        }
    }

    fn result(text: &str) -> Ending {
        Ending::Result(json!({"content": [{"type": "text", "text": text}], "isError": false}))
    }

    #[test]
    fn a_task_is_seen_only_by_its_owner() {
        let tasks = Tasks::new(TaskLimits::default());
        let task = tasks.create(Owner::Session(1), CancellationToken::new()).unwrap();
        assert_eq!(task.task_id.len(), 32);
        assert_eq!(
            tasks.get(Owner::Session(1), &task.task_id).unwrap().status(),
            TaskStatus::Working
        );
        for other in [Owner::Session(2), Owner::Stateless] {
            let error = tasks.get(other, &task.task_id).unwrap_err();
            assert_eq!(error.message, format!("unknown task: {}", task.task_id));
            assert!(tasks.cancel(other, &task.task_id).is_err());
        }
        tasks.finish(&task.task_id, result("done"));
        let done = tasks.get(Owner::Session(1), &task.task_id).unwrap();
        assert_eq!(done.status(), TaskStatus::Completed);
        assert!(matches!(done.payload, TaskPayload::Completed { ref result } if result["isError"] == false));
    }

    #[test]
    fn cancelling_cancels_the_call_and_the_task_ends_cancelled_when_it_stops() {
        let tasks = Tasks::new(TaskLimits::default());
        let cancel = CancellationToken::new();
        let task = tasks.create(Owner::Stateless, cancel.clone()).unwrap();
        tasks.cancel(Owner::Stateless, &task.task_id).unwrap();
        assert!(cancel.is_cancelled());
        assert_eq!(
            tasks.get(Owner::Stateless, &task.task_id).unwrap().status(),
            TaskStatus::Working
        );
        tasks.finish(&task.task_id, result("interrupted"));
        assert_eq!(
            tasks.get(Owner::Stateless, &task.task_id).unwrap().status(),
            TaskStatus::Cancelled
        );
        // A finished task stays as it is.
        tasks.cancel(Owner::Stateless, &task.task_id).unwrap();
        assert_eq!(
            tasks.get(Owner::Stateless, &task.task_id).unwrap().status(),
            TaskStatus::Cancelled
        );
    }

    #[test]
    fn a_task_waits_for_every_answer_of_its_round_and_its_owner_alone_answers() {
        use toolwright_core::client::InputRequest;
        let tasks = Tasks::new(TaskLimits::default());
        let task = tasks.create(Owner::Stateless, CancellationToken::new()).unwrap();
        let id = &task.task_id;
        let form = |key: &str| {
            InputRequest::new(
                key,
                "elicitation/create",
                serde_json::json!({"message": "?", "requestedSchema": {"type": "object", "properties": {}}}),
            )
        };
        let mut answered = tasks.await_input(id, vec![form("a"), form("b")]);
        let keys = |tasks: &Tasks| match tasks.get(Owner::Stateless, id).unwrap().payload {
            TaskPayload::InputRequired { input_requests } => {
                input_requests.keys().cloned().collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(keys(&tasks), ["a", "b"]);
        // Another owner is told the task does not exist, and answers nothing.
        let answer =
            std::collections::BTreeMap::from([("a".to_owned(), serde_json::json!({"action": "decline"}))]);
        assert!(tasks.update(Owner::Session(1), id, Some(&answer)).is_err());
        assert_eq!(keys(&tasks), ["a", "b"]);
        // One answer (and a key never asked): the other question stays.
        let mut some = answer.clone();
        some.insert("z".into(), serde_json::json!(1));
        tasks.update(Owner::Stateless, id, Some(&some)).unwrap();
        assert_eq!(keys(&tasks), ["b"]);
        assert!(answered.try_recv().is_err());
        let rest =
            std::collections::BTreeMap::from([("b".to_owned(), serde_json::json!({"action": "cancel"}))]);
        tasks.update(Owner::Stateless, id, Some(&rest)).unwrap();
        assert_eq!(
            tasks.get(Owner::Stateless, id).unwrap().status(),
            TaskStatus::Working
        );
        let all = answered.try_recv().unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b"]);
        // Cancelled while it waits: the wait ends (the answers never come).
        let answered = tasks.await_input(id, vec![form("c")]);
        tasks.cancel(Owner::Stateless, id).unwrap();
        assert!(answered.blocking_recv().is_err());
    }

    #[test]
    fn a_full_store_drops_the_oldest_finished_task_and_refuses_while_all_run() {
        let tasks = Tasks::new(limits(2, 1 << 20, Duration::from_secs(60)));
        let first = tasks.create(Owner::Stateless, CancellationToken::new()).unwrap();
        let second = tasks.create(Owner::Stateless, CancellationToken::new()).unwrap();
        let error = tasks
            .create(Owner::Stateless, CancellationToken::new())
            .unwrap_err();
        assert!(
            error.message.starts_with("too many tasks: 2 are running"),
            "{}",
            error.message
        );
        tasks.finish(&first.task_id, result("one"));
        let third = tasks.create(Owner::Stateless, CancellationToken::new()).unwrap();
        assert!(tasks.get(Owner::Stateless, &first.task_id).is_err());
        assert!(tasks.get(Owner::Stateless, &second.task_id).is_ok());
        assert!(tasks.get(Owner::Stateless, &third.task_id).is_ok());
    }

    #[test]
    fn results_over_the_byte_bound_drop_the_oldest_and_one_too_large_fails() {
        let tasks = Tasks::new(limits(10, 350, Duration::from_secs(60)));
        let ids: Vec<String> = (0..3)
            .map(|_| {
                tasks
                    .create(Owner::Stateless, CancellationToken::new())
                    .unwrap()
                    .task_id
            })
            .collect();
        tasks.finish(&ids[0], result(&"a".repeat(100)));
        tasks.finish(&ids[1], result(&"b".repeat(100)));
        assert_eq!(tasks.len(), 3);
        // The third does not fit beside both: the oldest goes.
        tasks.finish(&ids[2], result(&"c".repeat(100)));
        assert!(tasks.get(Owner::Stateless, &ids[0]).is_err());
        assert_eq!(
            tasks.get(Owner::Stateless, &ids[2]).unwrap().status(),
            TaskStatus::Completed
        );
        let big = tasks
            .create(Owner::Stateless, CancellationToken::new())
            .unwrap()
            .task_id;
        tasks.finish(&big, result(&"d".repeat(400)));
        let failed = tasks.get(Owner::Stateless, &big).unwrap();
        let TaskPayload::Failed { error } = failed.payload else {
            panic!("not failed")
        };
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("larger than the 350 bytes")
        );
    }

    #[tokio::test]
    async fn a_task_past_its_ttl_is_dropped_and_its_call_cancelled() {
        let tasks = Tasks::new(limits(10, 1 << 20, Duration::from_millis(50)));
        let cancel = CancellationToken::new();
        let task = tasks.create(Owner::Stateless, cancel.clone()).unwrap();
        assert_eq!(task.ttl_ms, Some(50));
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(tasks.get(Owner::Stateless, &task.task_id).is_err());
        assert!(cancel.is_cancelled());
    }
}
