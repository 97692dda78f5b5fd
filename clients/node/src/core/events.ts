// Keyspace events: which subscription `notify-keyspace-events` allows, and which events may
// mean a hold is lost (worth checking the hold at once). Pure.

/** Keyspace events that may end a hold on the key. */
export const LOSS_EVENTS: ReadonlySet<string> = new Set(["del", "expired", "evicted", "rlock.forcerelease", "rlock.expire", "rlock.sessionend", "rlock.release", "rename_from", "move_from"]);

export type EventMode = "keyevent" | "keyspace";

/** Which of the server's notifications tell this client of a hold's end: keyevent (`E`, one channel per event, the key as message) or keyspace (`K`, one channel per key), each with the module's class (`d`, or `A`); none without it. */
export function eventMode(flags: string): EventMode | null {
  if (!flags.includes("d") && !flags.includes("A")) return null;
  if (flags.includes("E")) return "keyevent";
  if (flags.includes("K")) return "keyspace";
  return null;
}

/** The channels to subscribe: keyevent mode one per loss event, once; keyspace mode one per key held. */
export function eventChannels(mode: EventMode, db: number, key?: string): string[] {
  if (mode === "keyevent") return [...LOSS_EVENTS].map((e) => `__keyevent@${db}__:${e}`);
  return key === undefined ? [] : [`__keyspace@${db}__:${key}`];
}

/** The key a message says may have lost its holds, or null when it says nothing of the kind. */
export function lossKey(mode: EventMode, db: number, channel: string, message: string): string | null {
  const prefix = mode === "keyevent" ? `__keyevent@${db}__:` : `__keyspace@${db}__:`;
  if (!channel.startsWith(prefix)) return null;
  const rest = channel.slice(prefix.length);
  if (mode === "keyevent") return LOSS_EVENTS.has(rest) ? message : null;
  return LOSS_EVENTS.has(message) ? rest : null;
}
