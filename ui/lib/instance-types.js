// Instance types as the forms show them: a label with the accelerators and EFA interfaces, and a
// one-line summary of the specs EC2 describes (or why it could not).

export function typeLabel(t) {
  const i = t.info;
  if (!i) return t.instance_type;
  const acc = i.accelerators ? `${i.accelerators}× ${i.accelerator}` : `${i.vcpus} vCPU`;
  const efa = i.efa_interfaces ? `, ${i.efa_interfaces} EFA` : '';
  return `${t.instance_type} — ${acc}${efa}`;
}

export function typeInfo(t) {
  const i = t && t.info;
  if (!i) return t ? 'EC2 does not describe this type in this region: it is accepted, and the checks that need its specs (EFA, accelerators) say they could not run.' : '';
  const parts = [`${i.vcpus} vCPU`, `${i.memory_gib} GiB memory`];
  if (i.accelerators) parts.push(`${i.accelerators}× ${i.accelerator}`);
  parts.push(i.efa_interfaces ? `${i.efa_interfaces} EFA interface${i.efa_interfaces > 1 ? 's' : ''}` : 'no EFA');
  parts.push(i.efa_only_supported ? 'EFA-only mode supported' : 'EFA-only mode not supported');
  return parts.join(' · ');
}
