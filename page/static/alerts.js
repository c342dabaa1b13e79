// The shopper's opt-in alerts for the turn: a browser notification (when
// the page is not in front) and a short chime. Both need the shopper's
// consent, asked on a click: the permission for notifications, and the
// gesture browsers ask before a page may play sound.

const KEY = 'flashsale:alerts';

export class TurnAlerts {
  /** @param {{get(k: string): string|null, set(k: string, v: string): void}} storage */
  constructor(storage) {
    this.storage = storage;
    this.enabled = storage.get(KEY) === '1';
    this.audio = null;
    if (this.enabled) {
      // Opted in before a reload: sound needs a gesture on this load too,
      // so the first one readies it.
      const ready = () => this.ready();
      globalThis.addEventListener('pointerdown', ready, { once: true });
      globalThis.addEventListener('keydown', ready, { once: true });
    }
  }

  /** notifications says whether the browser lets this page notify. */
  notifications() {
    return typeof Notification === 'function' && Notification.permission === 'granted';
  }

  /**
   * enable turns the alerts on; call it from a click. It resolves to
   * whether notifications are allowed (else the chime alone plays).
   */
  async enable() {
    this.enabled = true;
    this.storage.set(KEY, '1');
    this.ready();
    if (typeof Notification === 'function' && Notification.permission === 'default') {
      try {
        await Notification.requestPermission();
      } catch {
        // An older browser's callback form, or refused: the chime remains.
      }
    }
    return this.notifications();
  }

  /** ready makes (or wakes) the audio context, within a user gesture. */
  ready() {
    const AC = globalThis.AudioContext || globalThis.webkitAudioContext;
    if (!this.audio && AC) this.audio = new AC();
    if (this.audio && this.audio.state === 'suspended') this.audio.resume().catch(() => {});
  }

  /** chime plays two short rising tones. */
  chime() {
    const ctx = this.audio;
    if (!ctx || ctx.state !== 'running') return;
    const t0 = ctx.currentTime;
    [[0, 660], [0.16, 990]].forEach(([at, hz]) => {
      const osc = ctx.createOscillator();
      const gain = ctx.createGain();
      osc.frequency.value = hz;
      gain.gain.setValueAtTime(0.0001, t0 + at);
      gain.gain.exponentialRampToValueAtTime(0.25, t0 + at + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, t0 + at + 0.3);
      osc.connect(gain).connect(ctx.destination);
      osc.start(t0 + at);
      osc.stop(t0 + at + 0.32);
    });
  }

  /** turn alerts the shopper that the turn has come, if opted in. */
  turn(title, body) {
    if (!this.enabled) return;
    this.chime();
    if (this.notifications() && !document.hasFocus()) {
      try {
        const n = new Notification(title, { body, tag: 'flashsale-turn' });
        n.onclick = () => {
          globalThis.focus();
          n.close();
        };
      } catch {
        // Some mobile browsers notify only from a service worker.
      }
    }
  }
}
