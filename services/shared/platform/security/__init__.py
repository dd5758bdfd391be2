"""Security: who wrote a record, who decided a void, and the secrets kept at rest.

Record signatures (:class:`Signer`, :func:`verify`, the :class:`Keyring` of every service's
public keys); supervisors' signed decisions (a JWT, EdDSA: :func:`authenticate`,
:func:`check_time`, :class:`SupervisorKeyring`); the shoe's secret keys (:class:`SecretKeys`)
that encrypt fields at rest. Making keys and signing decisions is the tools'
(``services/tools/admin/``).
"""

from services.shared.platform.security.decisions import (
    AUDIENCE,
    CLAIMS_VERSION,
    JWS_REGISTRY,
    SUPERVISOR_ID,
    TOKEN_TYPE,
    Decision,
    DecisionRefused,
    SupervisorKey,
    SupervisorKeyring,
    SupervisorKeysError,
    authenticate,
    check_time,
    decision_id_of,
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
    load_keyring,
    load_private_key,
    load_secret_keys,
    read_key_file,
    replace_file,
    signer_for,
)
from services.shared.platform.security.signing import (
    ALGORITHM,
    Keyring,
    KeyringEntry,
    KeyringError,
    Signer,
    Where,
    public_key_pem,
    verify,
)
from services.shared.platform.security.signing import SCHEME as RECORD_SCHEME
