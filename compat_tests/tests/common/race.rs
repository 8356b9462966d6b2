//! A setting changed while writes run: when each change was sent and when it was answered,
//! so a write can be checked against the setting that was in force for the whole of it.
//!
//! A write sent after a change was answered and answered before the next one was sent ran
//! under that change's setting and nothing else: it must show it. A write that overlapped a
//! change may show either side (it was ordered before or after it).

use std::time::Instant;

/// The changes of one setting, in order, from `initial`.
pub struct Changes<S> {
    initial: S,
    /// (sent, answered, the setting).
    changes: Vec<(Instant, Instant, S)>,
}

impl<S: Clone> Changes<S> {
    pub fn new(initial: S) -> Self {
        Self {
            initial,
            changes: Vec::new(),
        }
    }

    /// A change to `setting`, sent at `sent` and answered at `answered` (after every change
    /// recorded before).
    pub fn record(&mut self, sent: Instant, answered: Instant, setting: S) {
        assert!(
            self.changes.last().is_none_or(|c| c.1 <= sent),
            "changes overlap"
        );
        self.changes.push((sent, answered, setting));
    }

    /// The setting in force from `sent` to `answered`, if no change overlapped that time.
    pub fn in_force(&self, sent: Instant, answered: Instant) -> Option<S> {
        let before = self.changes.iter().rposition(|c| c.1 <= sent);
        let next = before.map_or(0, |i| i + 1);
        if self.changes.get(next).is_some_and(|c| c.0 < answered) {
            return None;
        }
        Some(match before {
            Some(i) => self.changes[i].2.clone(),
            None => self.initial.clone(),
        })
    }

    /// Every write of `writes` that ran under one setting, with it.
    pub fn settled<'w, T>(&self, writes: &'w [Timed<T>]) -> Vec<(&'w T, S)> {
        writes
            .iter()
            .filter_map(|(sent, answered, w)| Some((w, self.in_force(*sent, *answered)?)))
            .collect()
    }
}

/// One write: when it was sent, when it was answered, and what it says.
pub type Timed<T> = (Instant, Instant, T);

/// Writers that run until stopped, each write timed.
pub struct Writers<T> {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    tx: Option<tokio::sync::mpsc::UnboundedSender<Timed<T>>>,
    rx: tokio::sync::mpsc::UnboundedReceiver<Timed<T>>,
}

impl<T> Default for Writers<T> {
    fn default() -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        Self {
            stop: Default::default(),
            tasks: Vec::new(),
            tx: Some(tx),
            rx,
        }
    }
}

impl<T: Send + 'static> Writers<T> {
    /// A writer doing `write(0)`, `write(1)`, … until the race is over.
    pub fn spawn<F, Fut>(&mut self, mut write: F)
    where
        F: FnMut(usize) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T> + Send,
    {
        let stop = self.stop.clone();
        let done = self.tx.clone().expect("before the race");
        self.tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let sent = Instant::now();
                let what = write(n).await;
                n += 1;
                done.send((sent, Instant::now(), what))
                    .expect("the race listens");
            }
        }));
    }

    /// Changes the setting from `initial` to each of `settings` in turn with `change`, and
    /// after each waits for `after_each` writes sent after it was answered (the writers' own
    /// pace: no sleep); then stops the writers. Answers the changes and every write.
    pub async fn race<S, C, Fut>(
        mut self,
        initial: S,
        settings: impl IntoIterator<Item = S>,
        after_each: usize,
        mut change: C,
    ) -> (Changes<S>, Vec<Timed<T>>)
    where
        S: Clone,
        C: FnMut(S) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        self.tx = None;
        let mut changes = Changes::new(initial);
        let mut writes = Vec::new();
        for s in settings {
            let sent = Instant::now();
            change(s.clone()).await;
            let answered = Instant::now();
            changes.record(sent, answered, s);
            let mut after = 0;
            while after < after_each {
                let w = self.rx.recv().await.expect("the writers run");
                after += usize::from(w.0 >= answered);
                writes.push(w);
            }
        }
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.tasks {
            t.await.expect("a writer");
        }
        while let Some(w) = self.rx.recv().await {
            writes.push(w);
        }
        (changes, writes)
    }
}
