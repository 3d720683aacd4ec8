import { useEffect } from 'react';
import { LiveProvider, useLive } from './live';
import { Link, useLocation } from './router';
import { ExperimentView, type ExperimentTab } from './views/Experiment';
import { ExperimentsView } from './views/Experiments';
import { RolloutView } from './views/Rollout';
import { SignIn, SignOutButton } from './views/SignIn';
import { TaskDetailView, TasksView } from './views/Tasks';
import { CompareView } from './views/Compare';
import { GlobalSqlView } from './views/GlobalSql';
import { RecordView } from './views/RecordView';
import { WorkersView } from './views/Workers';

export type Route =
  | { view: 'experiments' }
  | { view: 'experiment'; name: string; tab: ExperimentTab }
  | { view: 'rollout'; name: string; rolloutId: string }
  | { view: 'record'; name: string; id: string }
  | { view: 'tasks' }
  | { view: 'task'; id: string }
  | { view: 'sql' }
  | { view: 'compare' }
  | { view: 'workers' }
  | { view: 'notfound' };

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function matchRoute(pathname: string): Route {
  const p = pathname.replace(/\/+$/, '') || '/';
  if (p === '/' || p === '/experiments') return { view: 'experiments' };
  if (p === '/tasks') return { view: 'tasks' };
  if (p === '/sql') return { view: 'sql' };
  if (p === '/compare') return { view: 'compare' };
  const t = /^\/tasks\/([^/]+)$/.exec(p);
  if (t) return { view: 'task', id: decode(t[1]) };
  const rec = /^\/experiments\/([^/]+)\/records\/([^/]+)$/.exec(p);
  if (rec) return { view: 'record', name: decode(rec[1]), id: decode(rec[2]) };
  if (p === '/workers') return { view: 'workers' };
  const r = /^\/experiments\/([^/]+)\/rollouts\/([^/]+)$/.exec(p);
  if (r) return { view: 'rollout', name: decode(r[1]), rolloutId: decode(r[2]) };
  const m = /^\/experiments\/([^/]+)(?:\/(overview|records|sql))?$/.exec(p);
  if (m) return { view: 'experiment', name: decode(m[1]), tab: m[2] === 'records' || m[2] === 'sql' ? m[2] : 'overview' };
  return { view: 'notfound' };
}

function LiveToggle() {
  const { enabled, setEnabled, intervalMs } = useLive();
  return (
    <label className="live" title={`Re-fetch the current view every ${intervalMs / 1000} s while this tab is visible`}>
      <input
        type="checkbox"
        checked={enabled}
        onChange={(e) => setEnabled(e.target.checked)}
        data-testid="live-toggle"
      />
      <span className={enabled ? 'live-dot on' : 'live-dot'} aria-hidden="true" />
      Live
    </label>
  );
}

function Shell() {
  const { pathname } = useLocation();
  const route = matchRoute(pathname);
  const section =
    route.view === 'experiment' || route.view === 'rollout' || route.view === 'record'
      ? 'experiments'
      : route.view === 'task'
        ? 'tasks'
        : route.view;

  const title =
    route.view === 'rollout'
      ? `${route.rolloutId} · ${route.name} · lance-context`
      : route.view === 'record'
      ? `${route.id} · ${route.name} · lance-context`
      : route.view === 'task'
      ? `Task ${route.id} · lance-context`
      : route.view === 'sql'
      ? 'SQL · lance-context'
      : route.view === 'experiment'
      ? `${route.name} · lance-context`
      : route.view === 'notfound'
        ? 'lance-context'
        : `${section[0].toUpperCase()}${section.slice(1)} · lance-context`;
  useEffect(() => {
    document.title = title;
  }, [title]);

  const nav = (to: string, label: string, id: string) => (
    <Link to={to} className={section === id ? 'active' : undefined} aria-current={section === id ? 'page' : undefined}>
      {label}
    </Link>
  );

  return (
    <>
      <header className="header">
        <Link to="/" className="brand">
          lance<span>-context</span>
        </Link>
        <nav className="nav">
          {nav('/', 'Experiments', 'experiments')}
          {nav('/tasks', 'Tasks', 'tasks')}
          {nav('/sql', 'SQL', 'sql')}
          {nav('/compare', 'Compare', 'compare')}
          {nav('/workers', 'Workers', 'workers')}
        </nav>
        <span className="spacer" />
        <SignOutButton />
        <LiveToggle />
      </header>
      <main className="main">
        {route.view === 'experiments' ? <ExperimentsView /> : null}
        {route.view === 'experiment' ? <ExperimentView key={route.name} name={route.name} tab={route.tab} /> : null}
        {route.view === 'rollout' ? <RolloutView key={`${route.name}/${route.rolloutId}`} name={route.name} rolloutId={route.rolloutId} /> : null}
        {route.view === 'record' ? <RecordView key={`${route.name}/${route.id}`} name={route.name} id={route.id} /> : null}
        {route.view === 'tasks' ? <TasksView /> : null}
        {route.view === 'task' ? <TaskDetailView key={route.id} id={route.id} /> : null}
        {route.view === 'sql' ? <GlobalSqlView /> : null}
        {route.view === 'compare' ? <CompareView /> : null}
        {route.view === 'workers' ? <WorkersView /> : null}
        {route.view === 'notfound' ? (
          <section>
            <h1>Not found</h1>
            <p>
              No page at <span className="mono">{pathname}</span>. <Link to="/">Back to experiments</Link>
            </p>
          </section>
        ) : null}
      </main>
      <SignIn />
    </>
  );
}

/** The application. `live` and `intervalMs` override the live-refresh toggle and period (tests). */
export function App({ live, intervalMs }: { live?: boolean; intervalMs?: number }) {
  return (
    <LiveProvider enabled={live} intervalMs={intervalMs}>
      <Shell />
    </LiveProvider>
  );
}
