"""Security: who wrote a record, who decided a void, and the secrets kept at rest.

Record signatures (:class:`Signer`, :func:`verify`, the :class:`Keyring` of every service's
public keys, made by :func:`init_keys`); supervisors' signed decisions (a JWT, EdDSA:
:func:`authenticate`, :func:`check_time`, :class:`SupervisorKeyring`); the shoe's secret keys
(:class:`SecretKeys`) that encrypt fields at rest.
"""

from services.shared.platform.security.decisions import (
    Decision,
    DecisionRefused,
    SupervisorKey,
    SupervisorKeyring,
    SupervisorKeysError,
    SupervisorSigner,
    add_supervisor_key,
    authenticate,
    check_time,
    decision_id_of,
    ensure_supervisor_key,
    entry_json,
    load_supervisor_key,
    mismatch,
    read_decision,
)
from services.shared.platform.security.encryption import FieldDecryptionError
from services.shared.platform.security.keys import (
    KEY_FILE_VARIABLE,
    KEY_VARIABLE,
    KeysError,
    SecretKeyError,
    SecretKeys,
    create_private,
    env_form,
    init_keys,
    init_run_keys,
    init_secret_key,
    load_keyring,
    load_secret_keys,
    new_key,
    next_kid,
    replace_file,
    rotate_key,
    rotate_secret_key,
    signer_for,
)
from services.shared.platform.security.signing import (
    ALGORITHM,
    Keyring,
    KeyringEntry,
    KeyringError,
    Signer,
    Where,
    verify,
)
from services.shared.platform.security.signing import SCHEME as RECORD_SCHEME
