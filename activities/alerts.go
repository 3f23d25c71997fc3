package activities

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
)

// MailConfig is how mails (spending alerts, mentions) leave: an SMTP server and the sender.
type MailConfig struct {
	// URL is smtp://[user:password@]host[:port] (STARTTLS when the server offers it) or
	// smtps://… (TLS from the start).
	URL  string
	From string
	// AppURL is where the web app is (the API's public URL), for links in mails; none when empty.
	AppURL string
}

// client connects to the configured server.
func (m *MailConfig) client() (*mail.Client, error) {
	u, err := url.Parse(m.URL)
	if err != nil || u.Hostname() == "" || (u.Scheme != "smtp" && u.Scheme != "smtps") {
		return nil, fmt.Errorf("smtp url %q: want smtp://[user:password@]host[:port] or smtps://…", m.URL)
	}
	opts := []mail.Option{mail.WithTimeout(30 * time.Second)}
	if u.Scheme == "smtps" {
		opts = append(opts, mail.WithSSL(), mail.WithPort(465))
	} else {
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic), mail.WithPort(25))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("smtp url port %q: %w", p, err)
		}
		opts = append(opts, mail.WithPort(n))
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(u.User.Username()), mail.WithPassword(pw))
	}
	return mail.NewClient(u.Hostname(), opts...)
}

// mailer is the client that sends count due mails of what: nil (and a log line at level) when
// no mail server is configured, and the mails wait for one.
func (a *Activities) mailer(ctx context.Context, what string, count int, level slog.Level) (*mail.Client, error) {
	if a.Mail == nil || a.Mail.URL == "" {
		a.log().Log(ctx, level, what+" are due, and no SMTP server is configured (--smtp-url): they wait", "count", count)
		return nil, nil
	}
	return a.Mail.client()
}

// CheckLimitAlerts records and mails the alerts of alert limits whose period's spend has reached
// their threshold: one mail per limit per period. An alert is recorded before its mail is sent
// and marked sent after, so a crash in between sends it again rather than never. It returns how
// many mails it sent.
func (a *Activities) CheckLimitAlerts(ctx context.Context) (int, error) {
	due, err := a.billing().DueAlerts(ctx)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	client, err := a.mailer(ctx, "spending alerts", len(due), slog.LevelWarn)
	if client == nil || err != nil {
		return 0, err
	}
	sent := 0
	for i := range due {
		al := &due[i]
		l := al.Limit
		msg := mail.NewMsg()
		if err := msg.From(a.Mail.From); err != nil {
			return sent, fmt.Errorf("mail from %q: %w", a.Mail.From, err)
		}
		if err := msg.To(al.Recipient); err != nil {
			return sent, fmt.Errorf("mail to %q: %w", al.Recipient, err)
		}
		scope := "your API key"
		if l.MembershipID != nil {
			scope = "you"
		}
		msg.Subject(fmt.Sprintf("Proctor spending alert: $%s of $%s this %s", amount(al.SpendUSD), amount(l.AmountUSD), l.Interval))
		msg.SetBodyString(mail.TypeTextPlain, fmt.Sprintf("The spending limit %s on %s has reached %s%% of $%s this %s (since %s): $%s spent.\n\n"+
			"It alerts only; nothing was stopped. Change it with PATCH /v2/limits/%s.\n",
			l.ID, scope, amount(l.ThresholdPercent), amount(l.AmountUSD), l.Interval,
			al.PeriodStart.Format("2006-01-02"), amount(al.SpendUSD), l.ID))
		if err := client.DialAndSendWithContext(ctx, msg); err != nil {
			return sent, fmt.Errorf("send the alert of limit %s: %w", l.ID, err)
		}
		if err := a.billing().AlertSent(ctx, al); err != nil {
			return sent, err
		}
		sent++
		a.log().InfoContext(ctx, "spending alert sent", "limit", l.ID, "to", al.Recipient, "spend_usd", al.SpendUSD)
	}
	return sent, nil
}

// mentionMailBatch bounds the mentions one check mails; the rest go at the next.
const mentionMailBatch = 100

// SendMentionMails mails each member who was @mentioned in a task's comment, once: a mention is
// marked mailed after its mail went out, so a crash in between mails it again rather than never.
// Without a mail server the mentions wait (they are read in the app meanwhile). It returns how
// many mails it sent.
func (a *Activities) SendMentionMails(ctx context.Context) (int, error) {
	due, err := a.catalog().MentionsToMail(ctx, mentionMailBatch)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	// Mentions are read in the app meanwhile: waiting for a mail server is no warning.
	client, err := a.mailer(ctx, "mentions", len(due), slog.LevelDebug)
	if client == nil || err != nil {
		return 0, err
	}
	sent := 0
	for _, m := range due {
		msg := mail.NewMsg()
		if err := msg.From(a.Mail.From); err != nil {
			return sent, fmt.Errorf("mail from %q: %w", a.Mail.From, err)
		}
		if err := msg.To(m.Email); err != nil {
			// An address the server cannot take will not get better: the mention stays in the app.
			a.log().WarnContext(ctx, "a mention's recipient cannot be mailed", "to", m.Email, "error", err)
			if err := a.catalog().MentionMailed(ctx, m.ID); err != nil {
				return sent, err
			}
			continue
		}
		who := cmp.Or(m.ActorName, "Someone")
		msg.Subject(fmt.Sprintf("Proctor: %s mentioned you on task %s", who, m.TaskName))
		body := fmt.Sprintf("%s mentioned you in a comment on task %s:\n\n%s\n", who, m.TaskName, m.Comment)
		if a.Mail.AppURL != "" {
			body += fmt.Sprintf("\nOpen it: %s/#/tasksets/%s/tasks/%s\n", strings.TrimRight(a.Mail.AppURL, "/"), m.TasksetID, m.TaskID)
		}
		msg.SetBodyString(mail.TypeTextPlain, body)
		if err := client.DialAndSendWithContext(ctx, msg); err != nil {
			return sent, fmt.Errorf("send the mention %s: %w", m.ID, err)
		}
		if err := a.catalog().MentionMailed(ctx, m.ID); err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

// amount writes a figure as the API does: no more digits than it has.
func amount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
