/**
 * One operation at a time per key (a sandbox id): make, wake, sleep and destroy of one sandbox
 * never interleave, while different sandboxes go on in parallel.
 */
export function createKeyedQueue() {
  const queues = new Map<string, Promise<unknown>>();
  return function serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = queues.get(key) ?? Promise.resolve();
    const next = prev.catch(() => {}).then(fn);
    queues.set(key, next);
    void next
      .catch(() => {})
      .finally(() => {
        if (queues.get(key) === next) queues.delete(key);
      });
    return next;
  };
}
