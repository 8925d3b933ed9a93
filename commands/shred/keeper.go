package shred

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gocloud.dev/secrets"
	_ "gocloud.dev/secrets/localsecrets" // base64key:// keepers

	"github.com/imledger/imledger/domain"
)

// Keeper wraps and unwraps data keys with a tenant key it never reveals. *secrets.Keeper is one.
type Keeper interface {
	Encrypt(ctx context.Context, plaintext []byte) ([]byte, error)
	Decrypt(ctx context.Context, ciphertext []byte) ([]byte, error)
}

// Keepers finds the keeper of a tenant's key.
type Keepers interface {
	Keeper(ctx context.Context, tenant domain.TenantID) (Keeper, error)
}

// TenantPlaceholder in a keeper URL is replaced by the tenant id, giving each tenant its own key
// (e.g. "awskms://alias/imledger-{tenant}?region=eu-west-1").
const TenantPlaceholder = "{tenant}"

// URLKeepers opens gocloud.dev/secrets keepers from a URL, one per tenant when the URL holds
// TenantPlaceholder and one for every tenant otherwise. Keepers are opened on first use and kept
// until Close. The URL may hold a key (base64key://): it is never logged or returned in an error.
type URLKeepers struct {
	url     string
	mu      sync.Mutex
	keepers map[string]*secrets.Keeper
}

// NewURLKeepers returns the keepers of url; it opens nothing yet. An empty url is an error.
func NewURLKeepers(url string) (*URLKeepers, error) {
	if url == "" {
		return nil, errors.New("shred: keeper URL is required")
	}
	return &URLKeepers{url: url, keepers: map[string]*secrets.Keeper{}}, nil
}

// LocalKeeperURL returns the base64key:// URL of a local key given in standard or URL base64,
// checking that it is 32 bytes.
func LocalKeeperURL(key string) (string, error) {
	k, err := decodeLocalKey(key)
	if err != nil {
		return "", err
	}
	return "base64key://" + k, nil
}

// Keeper returns the keeper of tenant, opening it on first use.
func (u *URLKeepers) Keeper(ctx context.Context, tenant domain.TenantID) (Keeper, error) {
	url := u.url
	if strings.Contains(url, TenantPlaceholder) {
		url = strings.ReplaceAll(url, TenantPlaceholder, tenant.String())
	} else {
		url = ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if k, ok := u.keepers[url]; ok {
		return k, nil
	}
	open := url
	if open == "" {
		open = u.url
	}
	k, err := secrets.OpenKeeper(ctx, open)
	if err != nil {
		// The URL may carry the key: name only its scheme.
		scheme, _, _ := strings.Cut(open, "://")
		msg := strings.ReplaceAll(err.Error(), open, scheme+"://…")
		if _, host, ok := strings.Cut(open, "://"); ok && host != "" {
			msg = strings.ReplaceAll(msg, host, "…")
		}
		return nil, fmt.Errorf("open %s:// keeper of tenant %s: %s", scheme, tenant, msg)
	}
	u.keepers[url] = k
	return k, nil
}

// Close closes every keeper opened.
func (u *URLKeepers) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for _, k := range u.keepers {
		errs = append(errs, k.Close())
	}
	u.keepers = map[string]*secrets.Keeper{}
	return errors.Join(errs...)
}
