import { describe, expect, it } from 'vitest';
import { expandJsonStrings, logprobLevel, logprobStats, splitJson } from './turns';

describe('splitJson', () => {
  it('pretty-prints a turn that is one JSON value, parsing JSON held in strings', () => {
    const segs = splitJson('{"name":"search","arguments":"{\\"q\\":\\"lance\\",\\"k\\":3}"}');
    expect(segs).toEqual([{ kind: 'json', value: { name: 'search', arguments: { q: 'lance', k: 3 } } }]);
  });

  it('finds tool-call tags and fences inside text', () => {
    const segs = splitJson('Let me look.\n<tool_call>{"name":"ls","arguments":{"path":"/"}}</tool_call>\nthen ```json\n[1,2]\n``` done');
    expect(segs.map((s) => s.kind)).toEqual(['text', 'json', 'text', 'json', 'text']);
    expect(segs[1]).toEqual({ kind: 'json', value: { name: 'ls', arguments: { path: '/' } }, label: 'tool_call' });
    expect(segs[3]).toMatchObject({ kind: 'json', value: [1, 2] });
  });

  it('leaves text that is not JSON alone', () => {
    expect(splitJson('hello {world}')).toEqual([{ kind: 'text', text: 'hello {world}' }]);
    expect(splitJson('<tool_call>{not json}</tool_call>')).toEqual([{ kind: 'text', text: '<tool_call>{not json}</tool_call>' }]);
    expect(splitJson('')).toEqual([]);
  });

  it('stops parsing nested strings at a depth', () => {
    let s: unknown = '{"a":1}';
    for (let i = 0; i < 20; i++) s = JSON.stringify({ x: s });
    expect(() => expandJsonStrings(s)).not.toThrow();
  });
});

describe('logprobs', () => {
  it('summarises finite logprobs', () => {
    const st = logprobStats([-0.1, -0.3, null, Number.NaN, -0.2])!;
    expect(st.n).toBe(3);
    expect(st.mean).toBeCloseTo(-0.2);
    expect(st.min).toBeCloseTo(-0.3);
    expect(st.perplexity).toBeCloseTo(Math.exp(0.2));
    expect(logprobStats([])).toBeUndefined();
    expect(logprobStats(null)).toBeUndefined();
  });

  it('shades tokens by probability', () => {
    expect(logprobLevel(0)).toBe(0);
    expect(logprobLevel(Math.log(0.8))).toBe(1);
    expect(logprobLevel(Math.log(0.5))).toBe(2);
    expect(logprobLevel(Math.log(0.2))).toBe(3);
    expect(logprobLevel(Math.log(0.01))).toBe(4);
  });
});
