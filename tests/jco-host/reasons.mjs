// The generic reasons of the denials nobody explained (ahp_vocab
// `DecidedBy::generic_reason`): the host's own, and the component's synthetic ones. A
// record settled by one of these says so in these words, never another's.

export const GENERIC_REASONS = {
  'synthetic-deny': 'Required policy backend unavailable.',
  interrupted: 'Policy evaluation was interrupted.',
  'budget-expired': 'Policy evaluation did not finish within the hook call budget.',
  'engine-failure': 'Policy evaluation failed.',
  shutdown: 'The policy interceptor is shut down.',
};
