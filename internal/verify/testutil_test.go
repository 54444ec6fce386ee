package verify

import "encoding/base64"

// b64 is standard padded base64.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
