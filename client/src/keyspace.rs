//! The keyspace-event decisions, free of I/O: which `notify-keyspace-events` flags let a client
//! hear the module's events and how ([`mode`]), the channels to subscribe ([`channels`]), and
//! which messages say a hold may be gone ([`lost_key`]). The watchdog's listener
//! (`lossevents`) and the election's observer do the I/O around them. The shared vectors
//! (`clients/spec/keyspace.json`) hold the same decisions; its README says why each event is
//! in [`LOSS_EVENTS`].

/// Events that may mean a hold is gone: the module's own that end a hold, and the server's
/// that remove the key or a holder's field or replace the key (published when their classes
/// are on). Not `expire`/`pexpire` (every renewal sends one) nor `hset` (every acquire), so the
/// listener's own work never feeds it.
pub(crate) const LOSS_EVENTS: [&str; 29] = [
    "rlock.release",
    "rlock.expire",
    "rlock.forcerelease",
    "rlock.sessionend",
    "rsem.return",
    "rsem.reclaim",
    "del",
    "expired",
    "evicted",
    "rename_from",
    "move_from",
    "hdel",
    "hexpired",
    "set",
    "restore",
    "rename_to",
    "copy_to",
    "sortstore",
    "sunionstore",
    "sinterstore",
    "sdiffstore",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zrangestore",
    "georadiusstore",
    "geosearchstore",
    "overwritten",
    "type_changed",
];

/// How the module's events reach a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `K`: one channel per key (`__keyspace@<db>__:<key>`), the event as the message.
    Keyspace,
    /// `E` without `K`: one channel per event (`__keyevent@<db>__:<event>`), the key as the
    /// message, for every key of the database.
    Keyevent,
}

/// What `notify-keyspace-events` = `flags` lets a client follow: nothing without the module
/// class (`d`, or `A` which includes it); with it, the keyspace channels when `K` is on (they
/// carry only the keys subscribed), else the keyevent channels when `E` is.
pub(crate) fn mode(flags: &str) -> Option<Mode> {
    if !(flags.contains('d') || flags.contains('A')) {
        None
    } else if flags.contains('K') {
        Some(Mode::Keyspace)
    } else if flags.contains('E') {
        Some(Mode::Keyevent)
    } else {
        None
    }
}

/// The keyspace channel of `key` in database `db`.
pub(crate) fn keyspace_channel(db: i64, key: &str) -> String {
    format!("__keyspace@{db}__:{key}")
}

/// The keyevent channel of `event` in database `db`.
pub(crate) fn keyevent_channel(db: i64, event: &str) -> String {
    format!("__keyevent@{db}__:{event}")
}

/// The channels that tell of losses on `keys`: each key's, or each loss event's.
pub(crate) fn channels<'a>(
    mode: Mode,
    db: i64,
    keys: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    match mode {
        Mode::Keyspace => keys.into_iter().map(|k| keyspace_channel(db, k)).collect(),
        Mode::Keyevent => LOSS_EVENTS
            .iter()
            .map(|e| keyevent_channel(db, e))
            .collect(),
    }
}

/// The key whose holds a message on `channel` says may be gone, or `None`: a loss event on a
/// key's channel of database `db`, or a key on a loss event's channel of `db`.
pub(crate) fn lost_key<'a>(db: i64, channel: &'a str, payload: &'a [u8]) -> Option<&'a str> {
    let is_loss = |e: &[u8]| LOSS_EVENTS.iter().any(|l| l.as_bytes() == e);
    if let Some(key) = channel.strip_prefix(&format!("__keyspace@{db}__:")) {
        return is_loss(payload).then_some(key);
    }
    let event = channel.strip_prefix(&format!("__keyevent@{db}__:"))?;
    if is_loss(event.as_bytes()) {
        std::str::from_utf8(payload).ok()
    } else {
        None
    }
}

/// The value of a `CONFIG GET name` reply (RESP2 pair or RESP3 map).
pub(crate) fn config_value(v: redis::Value) -> Option<String> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match v {
        redis::Value::Array(a) => a.get(1).and_then(text),
        redis::Value::Map(m) => m.first().and_then(|(_, v)| text(v)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_get_replies_in_both_protocols() {
        let bulk = |s: &str| redis::Value::BulkString(s.as_bytes().to_vec());
        let resp2 = redis::Value::Array(vec![bulk("notify-keyspace-events"), bulk("dK")]);
        assert_eq!(config_value(resp2).as_deref(), Some("dK"));
        let resp3 = redis::Value::Map(vec![(bulk("notify-keyspace-events"), bulk("AE"))]);
        assert_eq!(config_value(resp3).as_deref(), Some("AE"));
        assert_eq!(config_value(redis::Value::Array(vec![])), None);
    }
}
