import { lazy, Suspense } from 'react';

// The charting library is most of the bundle: only the spend page loads it.
const Spend = lazy(() => import('./Spend.tsx').then((m) => ({ default: m.Spend })));

export function SpendPage() {
  return (
    <Suspense fallback={<p className="muted">Loading…</p>}>
      <Spend />
    </Suspense>
  );
}
