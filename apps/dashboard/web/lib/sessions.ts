import type { EventSession } from '@agentq/protocol';
import { byCreation } from './order.js';

/** Sessions deleted by retention that the page remembers (the oldest are forgotten first). */
const MAX_GONE = 10_000;

/**
 * A session as the page keeps it: from an answer (`Session`) or an event, which leaves out the
 * texts it has queued (`EventSession`); the page shows only how many there are.
 */
type Session = EventSession;

/**
 * The sessions a page has, by name, from the API's answers and the event stream. One mutable map
 * (a burst of events must not copy it per event): the view re-renders through a counter.
 *
 * A session never goes back to an older version, and one deleted by retention
 * (`session.evicted`) does not come back from a snapshot taken before its deletion: a list
 * answer read just before the sweep, or a parent that still names it as a child.
 */
export class SessionMap {
  readonly all = new Map<string, Session>();
  /** name -> `updated_at` of the version retention deleted */
  readonly #gone = new Map<string, string>();
  /**
   * parent name -> the names of its children the page has. A session object names only its
   * newest MAX_SESSION_LIST_ITEMS children: the others the page reads (a page of all sessions, a
   * node's "load more") are found here, not through their parent.
   */
  readonly #children = new Map<string, Set<string>>();
  /**
   * parent name -> its children's names in drawing order, for the version of the parent they were
   * sorted for; dropped when a child comes or goes. A node asks on every render (any session's
   * change re-renders the tree): sorting 10,000 children each time, most of them created at the
   * same instant by a batch, took 30-40 ms a render.
   */
  readonly #order = new Map<string, { parent: Session; names: string[] }>();

  /** Take a version of a session; false when the page has a newer one, or saw it deleted. */
  upsert(s: Session): boolean {
    const gone = this.#gone.get(s.session_name);
    if (gone !== undefined) {
      if (s.updated_at <= gone) return false;
      this.#gone.delete(s.session_name); // a new session of the same name
    }
    const known = this.all.get(s.session_name);
    if (known !== undefined && known.updated_at > s.updated_at) return false;
    this.all.set(s.session_name, this.#withoutGone(s));
    // a session never changes parent
    if (known === undefined && s.parent_session_name !== null) {
      let names = this.#children.get(s.parent_session_name);
      if (names === undefined) this.#children.set(s.parent_session_name, (names = new Set()));
      names.add(s.session_name);
      this.#order.delete(s.parent_session_name);
    }
    return true;
  }

  /**
   * The children of `parent` the page has, oldest first: every one, whether or not the parent's
   * version names it (it names the newest MAX_SESSION_LIST_ITEMS only). Children created at the
   * same instant (a batch) keep the order the parent names them in.
   */
  childrenOf(parent: Session): Session[] {
    const names = this.#children.get(parent.session_name);
    if (names === undefined) return [];
    let order = this.#order.get(parent.session_name);
    if (order?.parent !== parent) {
      const named = new Map(parent.children.map((name, i) => [name, i]));
      // each child's place computed once, not in every comparison
      const keyed = [...names].map((name) => {
        const c = this.all.get(name)!;
        return { name, created_at: c.created_at, seq: c.seq, rank: named.get(name) ?? -1 };
      });
      // at the same instant: creation order (`seq`) when both have one, as `GET /sessions?parent=` pages them
      keyed.sort((a, b) => byCreation(a, b) || a.rank - b.rank || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      order = { parent, names: keyed.map((k) => k.name) };
      this.#order.set(parent.session_name, order);
    }
    // the versions the page has now (a child's created_at never changes, so neither does its place)
    return order.names.map((name) => this.all.get(name)!);
  }

  /** A session deleted by retention (its last version): it leaves, and its parent's children. */
  evict(s: Session): boolean {
    const name = s.session_name;
    this.#gone.delete(name);
    this.#gone.set(name, s.updated_at);
    if (this.#gone.size > MAX_GONE) this.#gone.delete(this.#gone.keys().next().value!);
    let changed = this.all.delete(name);
    if (s.parent_session_name !== null && this.#children.get(s.parent_session_name)?.delete(name)) this.#order.delete(s.parent_session_name);
    const parent = s.parent_session_name === null ? undefined : this.all.get(s.parent_session_name);
    if (parent !== undefined && parent.children.includes(name)) {
      this.all.set(parent.session_name, this.#withoutGone(parent));
      changed = true;
    }
    return changed;
  }

  /** Forget the sessions (the page reads them again), not the deletions it saw. */
  clear(): void {
    this.all.clear();
    this.#children.clear();
    this.#order.clear();
  }

  #withoutGone(s: Session): Session {
    if (!s.children.some((c) => this.#gone.has(c))) return s;
    const children = s.children.filter((c) => !this.#gone.has(c));
    // the version named them, so its count holds them too: left in, the node would call the
    // deleted children "older child sessions not shown" (a coordinator from before the count sends none)
    if (s.children_count === undefined) return { ...s, children };
    const children_count = s.children_count - (s.children.length - children.length);
    return { ...s, children, children_count, children_truncated: children_count > children.length };
  }
}

/**
 * What a session holds for its next turn (child outcomes, messages) and when it goes, or null
 * when it holds nothing. A busy session gets them when its job ends. An idle one holds them on
 * purpose: after a stop, a delivery that did not complete, or a spent tree budget, they wait for
 * its next input; a closed session (`accepts_input: false`) takes none.
 */
export function pendingNote(s: Pick<Session, 'status' | 'accepts_input' | 'pending_callbacks' | 'pending_messages'>): string | null {
  const parts: string[] = [];
  const results = s.pending_callbacks.length;
  const messages = s.pending_messages.length;
  if (results > 0) parts.push(`${results} child result${results > 1 ? 's' : ''}`);
  if (messages > 0) parts.push(`${messages} message${messages > 1 ? 's' : ''}`);
  if (parts.length === 0) return null;
  const what = parts.join(' and ');
  if (!s.accepts_input) return `${what} held: this session is closed and takes no more input (start it again to deliver them)`;
  if (s.status === 'busy') return `${what} waiting for this session's current job to end`;
  return `${what} held until this session's next input (a resume, a message or another child's result)`;
}
