package inference

import "time"

// OpenAIModel is a model as OpenAI's API lists it (GET /models): the gateway's and a brought
// agent's port list their models so.
type OpenAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object" enum:"model"`
	Created int64  `json:"created" doc:"Unix seconds"`
	OwnedBy string `json:"owned_by"`
}

// AnthropicModel is a model as Anthropic's API lists it (GET /v1/models).
type AnthropicModel struct {
	Type        string    `json:"type" enum:"model"`
	ID          string    `json:"id"`
	DisplayName string    `json:"display_name"`
	CreatedAt   time.Time `json:"created_at"`
}

// AnthropicPage is the first and last ids of a page of Anthropic's model list, nil when it is
// empty.
func AnthropicPage(data []AnthropicModel) (first, last *string) {
	if n := len(data); n > 0 {
		return &data[0].ID, &data[n-1].ID
	}
	return nil, nil
}
