-- Every change to a sale reaches every server at once: a trigger on
-- sale_events writes a notification on the channel flashsale_sales in the
-- same transaction as the change, so PostgreSQL delivers it when, and only
-- when, the change commits (and never for one rolled back). Each origin
-- LISTENs on a connection of its own (postgres.SaleListener) and reads the
-- sale again into its catalog.
--
-- The writes that fire it are the operator's and the watcher's (create,
-- change, pause, resume, rebuild, close), a few per sale: reservations lock
-- the sale row FOR SHARE but never update it, so the purchase path sends
-- no notification and never waits on the commit-time lock NOTIFY takes.
--
-- The channel is one per database; the payload names the schema, so that
-- deployments (and tests) in separate schemas of one database each hear
-- only their own sales:
--   {"schema": "...", "sku": "...", "sale": "sale_...", "version": N}

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION flashsale_notify_sale() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- No %ROWTYPE: it would be resolved once per session through the
    -- search_path, and schemas side by side each have a sale_events.
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('flashsale_sales', json_build_object(
            'schema', TG_TABLE_SCHEMA, 'sku', OLD.sku, 'sale', OLD.sale_id, 'version', OLD.version)::text);
    ELSE
        PERFORM pg_notify('flashsale_sales', json_build_object(
            'schema', TG_TABLE_SCHEMA, 'sku', NEW.sku, 'sale', NEW.sale_id, 'version', NEW.version)::text);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER sale_events_notify
    AFTER INSERT OR UPDATE OR DELETE ON sale_events
    FOR EACH ROW EXECUTE FUNCTION flashsale_notify_sale();

-- +goose Down
DROP TRIGGER sale_events_notify ON sale_events;
DROP FUNCTION flashsale_notify_sale();
