package account

import "errors"

// SelfService is what a user does to their own account: start and end their login sessions,
// change or reset their password, sign out everywhere, bind a contact for resets. It gathers the
// Service (credentials), the Governance (the account stream) and the Sessions a transport needs
// behind one value; each method is the embedded type's.
type SelfService struct {
	*Service
	*Governance
	*Sessions
}

// NewSelfService checks that every part is there and returns the SelfService.
func NewSelfService(accounts *Service, governance *Governance, sessions *Sessions) (*SelfService, error) {
	if accounts == nil || governance == nil || sessions == nil {
		return nil, errors.New("account: self service: accounts, governance and sessions are required")
	}
	return &SelfService{Service: accounts, Governance: governance, Sessions: sessions}, nil
}
