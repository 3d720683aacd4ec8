import { fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { App } from './App';
import type { QueryResult } from './api';
import { jsonResponse, stubFetch, type Call } from './test/fetchStub';

const QUERY = '/api/v1/experiments/demo/query';

const RESULT: QueryResult = {
  columns: [
    { name: 'policy_version', type: 'VARCHAR' },
    { name: 'mean_reward', type: 'DOUBLE' },
    { name: 'n', type: 'BIGINT' },
  ],
  rows: [
    ['v1', 0.25, 4],
    ['v2', null, 1],
  ],
  row_count: 2,
  truncated: false,
  rows_scanned: 5,
  elapsed_ms: 3.5,
};

function renderSql() {
  window.history.replaceState(null, '', '/experiments/demo/sql');
  return render(<App live={false} />);
}

describe('SQL console', () => {
  it('runs the query with the chosen source and shows columns, rows and figures', async () => {
    const f = stubFetch({ [`POST ${QUERY}`]: () => RESULT });
    renderSql();
    expect(screen.getByTestId('tab-sql').getAttribute('aria-selected')).toBe('true');
    const input = screen.getByTestId('sql-input') as HTMLTextAreaElement;
    fireEvent.change(input, { target: { value: 'SELECT policy_version, avg(reward), count(*) FROM records GROUP BY 1' } });
    fireEvent.change(screen.getByTestId('sql-source'), { target: { value: 'wal' } });
    fireEvent.click(screen.getByTestId('sql-run'));
    const table = await screen.findByTestId('sql-results');
    expect(f.to(QUERY, 'POST')).toHaveLength(1);
    expect(f.last(QUERY, 'POST')!.body).toEqual({
      sql: 'SELECT policy_version, avg(reward), count(*) FROM records GROUP BY 1',
      source: 'wal',
    });
    const heads = within(table).getAllByRole('columnheader').map((h) => h.textContent);
    expect(heads).toEqual(['policy_version VARCHAR', 'mean_reward DOUBLE', 'n BIGINT']);
    const rows = within(table).getAllByTestId('sql-row');
    expect(rows).toHaveLength(2);
    expect(rows[0].textContent).toBe('v10.254');
    expect(within(rows[1]).getByText('null')).toBeTruthy();
    const meta = screen.getByTestId('sql-meta').textContent!;
    expect(meta).toContain('2 rows');
    expect(meta).toContain('5 rows scanned');
    expect(meta).toContain('3.5 ms');
    expect(meta).not.toContain('truncated');
  });

  it('Ctrl+Enter runs the query; a truncated result is marked', async () => {
    const f = stubFetch({ [`POST ${QUERY}`]: () => ({ ...RESULT, rows: [RESULT.rows[0]], row_count: 1, truncated: true, rows_scanned: 200000 }) });
    renderSql();
    const input = screen.getByTestId('sql-input');
    fireEvent.keyDown(input, { key: 'Enter' }); // plain Enter is a newline, not a run
    expect(f.to(QUERY, 'POST')).toHaveLength(0);
    fireEvent.keyDown(input, { key: 'Enter', ctrlKey: true });
    const meta = await screen.findByTestId('sql-meta');
    expect(f.to(QUERY, 'POST')).toHaveLength(1);
    expect(f.last(QUERY, 'POST')!.body).toMatchObject({ source: 'all' });
    expect(meta.textContent).toContain('1 row ·');
    expect(meta.textContent).toContain('200,000 rows scanned');
    expect(meta.textContent).toContain('truncated');
  });

  it("shows the server's message on an error and drops the old result", async () => {
    let fail = false;
    stubFetch({
      [`POST ${QUERY}`]: () =>
        fail
          ? jsonResponse({ error: { code: 'invalid_argument', message: 'read_csv is not allowed: the query can read only the stores' } }, 400)
          : RESULT,
    });
    renderSql();
    fireEvent.click(screen.getByTestId('sql-run'));
    await screen.findByTestId('sql-results');
    fail = true;
    fireEvent.change(screen.getByTestId('sql-input'), { target: { value: "SELECT * FROM read_csv('/etc/passwd')" } });
    fireEvent.click(screen.getByTestId('sql-run'));
    const alert = await within(screen.getByTestId('sql-error')).findByRole('alert');
    expect(alert.textContent).toBe('read_csv is not allowed: the query can read only the stores');
    expect(screen.queryByTestId('sql-results')).toBeNull();
  });

  it('says when a query returned no rows', async () => {
    stubFetch({ [`POST ${QUERY}`]: () => ({ ...RESULT, rows: [], row_count: 0 }) });
    renderSql();
    fireEvent.click(screen.getByTestId('sql-run'));
    expect((await screen.findByTestId('sql-empty')).textContent).toContain('no rows');
    expect(screen.getByTestId('sql-meta').textContent).toContain('0 rows');
  });

  it('links rollout_id cells to the conversation view', async () => {
    stubFetch({
      [`POST ${QUERY}`]: () => ({ ...RESULT, columns: [{ name: 'rollout_id', type: 'VARCHAR' }], rows: [['r/1']], row_count: 1 }),
      'GET /api/v1/experiments/demo/trajectories/*': (c: Call) => ({ rollout_id: c.url.pathname, records: [], count: 0 }),
    });
    renderSql();
    fireEvent.click(screen.getByTestId('sql-run'));
    const link = await within(await screen.findByTestId('sql-results')).findByRole('link', { name: 'r/1' });
    expect(link.getAttribute('href')).toBe('/experiments/demo/rollouts/r%2F1');
    fireEvent.click(link);
    await waitFor(() => expect(window.location.pathname).toBe('/experiments/demo/rollouts/r%2F1'));
    expect(await screen.findByTestId('rollout-empty')).toBeTruthy();
  });

  it('keeps the draft of each store for the session', async () => {
    stubFetch({});
    const r = renderSql();
    fireEvent.change(screen.getByTestId('sql-input'), { target: { value: 'SELECT 42' } });
    r.unmount();
    renderSql();
    expect((screen.getByTestId('sql-input') as HTMLTextAreaElement).value).toBe('SELECT 42');
  });
});
