// Keyspace events: which subscription `notify-keyspace-events` allows, and which events may
// mean a hold is lost (worth checking the hold at once). Pure.

/**
 * Every event that can end a hold, and none that a client's own work sends for a hold that
 * stands (`expire`/`pexpire` of a renewal, `hset` of an acquire): the one list of the shared
 * vectors (clients/spec/keyspace.json `loss_events`, in its order), which test/spec.test.mjs
 * checks this against.
 */
export const LOSS_EVENTS: readonly string[] = [
  // the module's: a hold released, expired, force-released, its session ended; a permit returned or reclaimed
  "rlock.release", "rlock.expire", "rlock.forcerelease", "rlock.sessionend", "rsem.return", "rsem.reclaim",
  // the key removed
  "del", "expired", "evicted", "rename_from", "move_from",
  // a holder's field removed
  "hdel", "hexpired",
  // the key replaced by a command that names it as destination
  "set", "restore", "rename_to", "copy_to", "sortstore", "sunionstore", "sinterstore", "sdiffstore",
  "zunionstore", "zinterstore", "zdiffstore", "zrangestore", "georadiusstore", "geosearchstore",
  // Redis 8.2's generic classes
  "overwritten", "type_changed",
];
const LOSS = new Set(LOSS_EVENTS);

export type EventMode = "keyevent" | "keyspace";

/**
 * Which of the server's notifications tell this client of a hold's end, with the module's class
 * on (`d`, or `A`, which holds it): keyspace (`K`, one channel per key held) when on, since it
 * hears only those keys; else keyevent (`E`, one channel per loss event carrying every key of the
 * database); none without either.
 */
export function eventMode(flags: string): EventMode | null {
  if (!flags.includes("d") && !flags.includes("A")) return null;
  if (flags.includes("K")) return "keyspace";
  if (flags.includes("E")) return "keyevent";
  return null;
}

/** The channels to subscribe: keyevent mode one per loss event, once; keyspace mode one per key held. */
export function eventChannels(mode: EventMode, db: number, key?: string): string[] {
  if (mode === "keyevent") return LOSS_EVENTS.map((e) => `__keyevent@${db}__:${e}`);
  return key === undefined ? [] : [`__keyspace@${db}__:${key}`];
}

/** The key whose holds a message says may be lost (to check now), or null when it says nothing of the kind: another channel, another database, an event that ends no hold. */
export function lossKey(db: number, channel: string, message: string): string | null {
  const keyspace = `__keyspace@${db}__:`;
  const keyevent = `__keyevent@${db}__:`;
  if (channel.startsWith(keyspace)) return LOSS.has(message) ? channel.slice(keyspace.length) : null;
  if (channel.startsWith(keyevent)) return LOSS.has(channel.slice(keyevent.length)) ? message : null;
  return null;
}
