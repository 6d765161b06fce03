// Vitest 5 reports failures with Map.groupBy, which Node 20 lacks: the
// vitest configurations of clients/typescript, clients/react and web
// import this file first.
if (typeof (Map as { groupBy?: unknown }).groupBy !== "function") {
  (Map as unknown as { groupBy: unknown }).groupBy = <K, V>(items: Iterable<V>, key: (v: V, i: number) => K) => {
    const out = new Map<K, V[]>();
    let i = 0;
    for (const v of items) {
      const k = key(v, i++);
      const list = out.get(k);
      if (list) list.push(v);
      else out.set(k, [v]);
    }
    return out;
  };
}

export {};
